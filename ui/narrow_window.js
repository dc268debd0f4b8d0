// On a window narrower than `data.max_width`, folds the sidebar away once per page per browser tab, so a
// workbench page gets the width its criteria and pickers need (at 1024 px the sidebar takes a quarter). Once:
// whoever opens the sidebar again keeps it open until they leave the page.
export default function (component) {
  const { data } = component;
  if (!data) return;
  document.documentElement.dataset.ccNarrowWindow = String(data.max_width);
  if (window.innerWidth >= data.max_width) return;
  const page = window.location.pathname.replace(/\/+$/, "").split("/").pop();
  if (!(data.pages || []).includes(page)) return;
  const done = "ccSidebarFolded:" + window.location.pathname;
  try {
    if (window.sessionStorage.getItem(done)) return;
  } catch (error) {
    // no session storage (a private window's policy): fold on every load
  }
  const fold = (attempt) => {
    const button = document.querySelector('[data-testid="stSidebarCollapseButton"] button');
    if (button && button.getAttribute("aria-expanded") === "true") {
      button.click();
      try {
        window.sessionStorage.setItem(done, "1");
      } catch (error) {
        // as above
      }
      return;
    }
    if (attempt < 30) window.setTimeout(() => fold(attempt + 1), 100);
  };
  fold(0);
}
