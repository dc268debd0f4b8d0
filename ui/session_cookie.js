// Keeps the sign-in token in a first-party cookie, never in the URL.
// SameSite=Strict: no other site's link or form carries it; Secure whenever the page is on https.
export default function (component) {
  const { data } = component;
  if (!data || !data.name) {
    return;
  }
  const secure = window.location.protocol === "https:" ? "; Secure" : "";
  const value = data.token ? encodeURIComponent(data.token) : "";
  const maxAge = data.token ? data.max_age : 0;
  document.cookie = `${data.name}=${value}; Path=/; Max-Age=${maxAge}; SameSite=Strict${secure}`;
}
