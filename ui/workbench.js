// The decision workbench: a text (the response) beside a list of items (criteria or cells), one key
// per decision. Plain JavaScript for Streamlit's components v2; no build step.
//
// Python sends `data` (texts from the catalog, the items and their working states, a `token` that
// names this load of this item). The component answers with
//   state "work"   {token, decisions, notes, active_ms}      after every decision (kept as a draft)
//   trigger "save" {token, decisions, notes, active_ms, advance}   on Ctrl+Enter or the save button
//   trigger "go"   {token, direction}   on J (1) / K (-1) when `response_keys` is set: J/K then move between
//                  responses of the page's queue, ↑/↓ between items
// Every rule (who may see what, what may be saved) is decided on the server; this only collects keys.
// The case (its context) stays in view above the response: C folds it away and back, never in its place.
// Space / PageDown and Shift+Space / PageUp scroll the response; the focused item stays where it is.
// `draft_state` (when sent) says what is true of the kept draft; a `transient` message (a restored
// draft) goes once work resumes.
// `readonly` (final labels) shows the decisions and takes none; items `marked` are to be decided again
// (their extra lines show the saved value beside the draft's) and the first of them gets the focus.
// The focused item's `terms` are marked in the response: its text nodes are split and each match
// wrapped in a <mark> made with DOM calls, so no user text is ever read as HTML.
// User text is always set with textContent, never as HTML.

const IDLE_MS = 60000;
const PICKER_KEYS = new Set([
  "1", "0", "y", "Y", "n", "N", "j", "J", "k", "K", "e", "E", "ArrowUp", "ArrowDown", "PageDown", "PageUp",
]);
const SCROLL_KEYS = new Set([" ", "PageDown", "PageUp"]);

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function isTyping(event) {
  const target = event.composedPath ? event.composedPath()[0] : event.target;
  if (!target || !target.tagName) return false;
  // A closed picker keeps the focus after a choice: the decision keys still decide.
  const closedPicker = target.getAttribute && target.getAttribute("role") === "combobox" &&
    target.getAttribute("aria-expanded") !== "true";
  // (codes and case ids start with a letter R or C, so those stay the picker's)
  if (closedPicker && PICKER_KEYS.has(event.key)) return false;
  const tag = target.tagName.toUpperCase();
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
}

// True while the user types in a field outside the workbench, or in a picker they have opened:
// a redraw must not take that focus (their next keys would decide items or fill the rationale).
function typingElsewhere(wb) {
  const active = document.activeElement;
  if (!active || !active.getAttribute || !active.tagName || wb.contains(active)) return false;
  if (active.getAttribute("role") === "combobox") return active.getAttribute("aria-expanded") === "true";
  const tag = active.tagName.toUpperCase();
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || active.isContentEditable;
}

function build(root) {
  const wb = el("div", "wb");
  wb.innerHTML = `
    <div class="wb-top">
      <div class="wb-request"><span class="wb-request-label"></span><span class="wb-request-text"></span></div>
    </div>
    <div class="wb-body">
      <div class="wb-left">
        <div class="wb-case">
          <div class="wb-case-head">
            <span class="wb-context-title"></span><span class="wb-meta"></span>
            <button type="button" class="wb-context-toggle"></button>
          </div>
          <div class="wb-context"><div class="wb-context-text"></div></div>
        </div>
        <div class="wb-pane-title"></div>
        <div class="wb-text"></div>
      </div>
      <div class="wb-right">
        <div class="wb-items-head"><span class="wb-items-title"></span><span class="wb-unsaved" hidden></span></div>
        <label class="wb-shared" hidden><span class="wb-shared-label"></span><input type="text" class="wb-shared-input"></label>
        <div class="wb-items" role="list"></div>
      </div>
    </div>
    <div class="wb-bottom">
      <div class="wb-legend"></div>
      <div class="wb-message" role="status"></div>
      <div class="wb-count"></div>
      <span class="wb-confirm" hidden><span class="wb-confirm-text"></span>
        <button type="button" class="wb-confirm-yes"></button><button type="button" class="wb-confirm-no"></button></span>
      <button type="button" class="wb-rest"></button>
      <button type="button" class="wb-save"></button>
    </div>`;
  root.appendChild(wb);
  return wb;
}

export default function (component) {
  const { data, parentElement, setStateValue, setTriggerValue } = component;
  if (!data) return;
  const host = parentElement;
  let s = host.__workbench;
  if (!s) {
    // The case strip's state outlives the item: a physician who folded it keeps it folded.
    s = host.__workbench = { wb: build(host), token: null, caseOpen: true };
  }
  const wb = s.wb;
  const q = (sel) => wb.querySelector(sel);
  const T = data.texts || {};

  // A new token: a new item (or a fresh load after a refusal). Otherwise the local state wins, so a
  // rerun caused by our own draft update never takes back a decision made since.
  if (s.token !== data.token) {
    s.token = data.token;
    s.items = data.items || [];
    s.decisions = {};
    s.notes = {};
    s.shared = data.shared_note || "";
    for (const item of s.items) {
      s.decisions[item.key] = item.state === true ? true : item.state === false ? false : null;
      if (item.note) s.notes[item.key] = item.note;
    }
    s.activeMs = Number(data.active_ms || 0);
    s.lastEvent = Date.now();
    s.readonly = !!data.readonly;
    s.focus = s.items.findIndex((item) => item.marked);
    if (s.focus < 0) s.focus = s.items.findIndex((item) => s.decisions[item.key] === null);
    if (s.focus < 0) s.focus = 0;
    s.editing = null;
    s.unsaved = !!data.unsaved;
    s.messageToken = null;
    renderStatic();
    renderItems();
    setTimeout(() => { if (!typingElsewhere(wb)) focusItem(s.focus, false); }, 0);
    // A response just chosen in the page's picker leaves the focus in the picker: take it back, so
    // the first key already decides. Only from a closed picker: one the user has opened again (to
    // type another code) keeps the focus, or their typing would land in the items and the rationale.
    setTimeout(() => {
      const active = document.activeElement;
      if (active && active.getAttribute && active.getAttribute("role") === "combobox" &&
          active.getAttribute("aria-expanded") !== "true") {
        active.blur();
        focusItem(s.focus, false);
      }
    }, 400);
  } else if (s.words !== JSON.stringify(T)) {
    // The same item in the other language (the reader switched): the words change, decisions and notes stay.
    s.items = data.items || s.items;
    renderStatic();
    renderItems();
    setTimeout(() => focusItem(s.focus, false), 0);
  }
  s.words = JSON.stringify(T);
  s.draftState = typeof data.draft_state === "string" ? data.draft_state : null;
  updateCount();
  if (data.message && data.message.id !== s.messageToken) {
    s.messageToken = data.message.id;
    const box = q(".wb-message");
    box.textContent = data.message.text || "";
    box.dataset.kind = data.message.kind || "info";
    s.transient = !!data.message.transient;
    // A refusal about one item (a note it needs) opens that item's note, so the next keys type it.
    const named = data.message.focus ? s.items.findIndex((item) => item.key === data.message.focus) : -1;
    if (data.message.kind === "error" && named >= 0) {
      focusItem(named, true);
      editNote(named);
    } else if (data.message.kind === "error") {
      const first = s.items.findIndex((item) => s.decisions[item.key] === null);
      if (first >= 0) focusItem(first, true);
    }
  }
  fitHeight();

  function renderStatic() {
    q(".wb-request-label").textContent = T.request || "";
    q(".wb-request-text").textContent = data.request || "";
    q(".wb-context-title").textContent = T.case || "";
    q(".wb-meta").textContent = data.meta || "";
    q(".wb-context-text").textContent = data.context || "";
    q(".wb-pane-title").textContent = data.text_title || "";
    q(".wb-text").textContent = data.text || "";
    q(".wb-items-title").textContent = data.items_title || "";
    q(".wb-legend").textContent = s.readonly ? "" : T.legend || "";
    q(".wb-rest").textContent = T.mark_rest || "";
    q(".wb-rest").hidden = !T.mark_rest || s.readonly;
    q(".wb-save").textContent = T.save || "";
    q(".wb-save").hidden = s.readonly;
    wb.classList.toggle("wb-readonly", s.readonly);
    q(".wb-confirm-yes").textContent = T.confirm_yes || "";
    q(".wb-confirm-no").textContent = T.confirm_no || "";
    q(".wb-confirm").hidden = true;
    q(".wb-case").hidden = !data.context && !data.meta;
    showCase();
    q(".wb-message").textContent = "";
    s.transient = false;
    q(".wb-shared").hidden = !T.shared_note;
    q(".wb-shared-label").textContent = T.shared_note || "";
    q(".wb-shared-input").value = s.shared;
    q(".wb-shared-input").placeholder = T.shared_hint || "";
    q(".wb-shared-input").maxLength = data.note_max || 2000;
    q(".wb-text").scrollTop = 0;
    q(".wb-items").scrollTop = 0;
  }

  function renderItems() {
    const list = q(".wb-items");
    list.replaceChildren();
    s.items.forEach((item, index) => {
      const row = el("div", item.marked ? "wb-item wb-marked" : "wb-item");
      row.tabIndex = 0;
      row.setAttribute("role", "listitem");
      row.dataset.index = String(index);
      const head = el("div", "wb-item-head");
      head.appendChild(el("span", "wb-num", item.title));
      const text = el("div", "wb-item-text", item.text);
      head.appendChild(text);
      const choice = el("div", "wb-choice");
      const yes = el("button", "wb-yes", T.met);
      const no = el("button", "wb-no", T.not_met);
      yes.type = no.type = "button";
      yes.tabIndex = no.tabIndex = -1;
      yes.disabled = no.disabled = s.readonly;
      yes.addEventListener("click", () => { decide(index, true, false); });
      no.addEventListener("click", () => { decide(index, false, false); });
      choice.append(yes, no);
      head.appendChild(choice);
      row.appendChild(head);
      for (const line of item.lines || []) {
        const extra = el("div", "wb-line");
        extra.appendChild(el("span", "wb-line-label", line.label));
        extra.appendChild(el("span", "wb-line-value", line.value));
        if (line.note) extra.appendChild(el("span", "wb-line-note", line.note));
        row.appendChild(extra);
      }
      const note = el("div", "wb-note");
      row.appendChild(note);
      row.addEventListener("click", () => focusItem(index, false));
      list.appendChild(row);
      paint(index);
    });
    updateCount();
  }

  function rowAt(index) {
    return q(`.wb-item[data-index="${index}"]`);
  }

  function paint(index) {
    const item = s.items[index];
    const row = rowAt(index);
    if (!item || !row) return;
    const value = s.decisions[item.key];
    row.dataset.state = value === true ? "met" : value === false ? "not" : "none";
    row.setAttribute("aria-label", `${item.title} ${value === true ? T.met : value === false ? T.not_met : T.unjudged}`);
    const note = row.querySelector(".wb-note");
    if (s.editing === index) return;
    note.replaceChildren();
    const text = s.notes[item.key];
    if (text) note.appendChild(el("span", "wb-note-text", `${T.note_label || ""}${text}`));
  }

  function updateCount() {
    const judged = s.items.filter((item) => s.decisions[item.key] !== null).length;
    q(".wb-count").textContent = (T.count || "{judged}/{total}")
      .replace("{judged}", judged).replace("{total}", s.items.length);
    // What the server says of the kept draft when it says it; else the page's own word for unsaved work.
    const state = s.draftState !== null && s.draftState !== undefined ? s.draftState : s.unsaved ? T.unsaved || "" : "";
    q(".wb-unsaved").textContent = state;
    q(".wb-unsaved").hidden = !state;
  }

  // The notice of a restored draft has said what it had to once the physician works again.
  function resumeWork() {
    if (!s.transient) return;
    s.transient = false;
    q(".wb-message").textContent = "";
  }

  // One screen less a few lines, so the last lines read stay in view after the jump.
  function scrollResponse(direction) {
    const pane = q(".wb-text");
    const step = Math.max(40, pane.clientHeight - 48);
    pane.scrollTop = Math.max(0, Math.min(pane.scrollHeight - pane.clientHeight, pane.scrollTop + direction * step));
  }

  // Where the terms occur in `text`: [start, end) ranges, earliest first, a longer term winning a tie.
  function matches(text, terms) {
    const found = [];
    for (const term of terms) {
      for (let at = text.indexOf(term); at >= 0; at = text.indexOf(term, at + term.length)) {
        found.push([at, at + term.length]);
      }
    }
    found.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
    const kept = [];
    for (const range of found) if (!kept.length || range[0] >= kept[kept.length - 1][1]) kept.push(range);
    return kept;
  }

  function markTerms(terms) {
    const pane = q(".wb-text");
    for (const mark of pane.querySelectorAll("mark.wb-mark")) mark.replaceWith(document.createTextNode(mark.textContent));
    pane.normalize();
    if (!terms || !terms.length) return;
    const walker = document.createTreeWalker(pane, NodeFilter.SHOW_TEXT);
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    for (const node of nodes) {
      const text = node.textContent;
      const ranges = matches(text, terms);
      if (!ranges.length) continue;
      const parts = document.createDocumentFragment();
      let from = 0;
      for (const [start, end] of ranges) {
        if (start > from) parts.appendChild(document.createTextNode(text.slice(from, start)));
        parts.appendChild(el("mark", "wb-mark", text.slice(start, end)));
        from = end;
      }
      if (from < text.length) parts.appendChild(document.createTextNode(text.slice(from)));
      node.replaceWith(parts);
    }
  }

  function focusItem(index, scroll) {
    if (!s.items.length) return;
    s.focus = Math.max(0, Math.min(index, s.items.length - 1));
    if (s.marked !== s.focus || !q(".wb-text mark.wb-mark")) {
      s.marked = s.focus;
      markTerms(s.items[s.focus].terms);
    }
    const row = rowAt(s.focus);
    if (!row) return;
    for (const other of wb.querySelectorAll(".wb-item.wb-focus")) other.classList.remove("wb-focus");
    row.classList.add("wb-focus");
    row.focus({ preventScroll: true });
    const list = q(".wb-items");
    const top = row.offsetTop - list.offsetTop;
    if (top < list.scrollTop || top + row.offsetHeight > list.scrollTop + list.clientHeight) {
      list.scrollTop = Math.max(0, top - 8);
    } else if (scroll) {
      row.scrollIntoView({ block: "nearest" });
    }
  }

  function tick() {
    const now = Date.now();
    const gap = now - s.lastEvent;
    if (gap <= IDLE_MS) s.activeMs += gap;
    s.lastEvent = now;
  }

  function payload() {
    return {
      token: s.token, decisions: { ...s.decisions }, notes: { ...s.notes }, shared_note: s.shared,
      active_ms: Math.round(s.activeMs),
    };
  }

  function sendWork() {
    s.unsaved = true;
    updateCount();
    setStateValue("work", payload());
  }

  function decide(index, value, move) {
    if (s.readonly) return;
    tick();
    resumeWork();
    const item = s.items[index];
    if (!item) return;
    s.decisions[item.key] = value;
    paint(index);
    sendWork();
    if (move) focusItem(index + 1, true);
    else focusItem(index, false);
  }

  function commitShared() {
    const value = q(".wb-shared-input").value.trim();
    if (value !== s.shared) { s.shared = value; tick(); sendWork(); }
  }

  function save(advance) {
    if (s.readonly) return;
    tick();
    commitNote();
    if (T.shared_note) commitShared();
    setTriggerValue("save", { ...payload(), advance });
  }

  // The next (1) or previous (-1) response of the page's queue; what was decided is kept as a draft already.
  function go(direction) {
    commitNote();
    setTriggerValue("go", { token: s.token, direction });
  }

  function editNote(index) {
    if (s.readonly) return;
    const item = s.items[index];
    const row = rowAt(index);
    if (!item || !row) return;
    s.editing = index;
    const box = row.querySelector(".wb-note");
    box.replaceChildren();
    const input = el("input", "wb-note-input");
    input.type = "text";
    input.maxLength = data.note_max || 2000;
    input.placeholder = T.note_hint || "";
    input.value = s.notes[item.key] || "";
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) return; // the page's save
      if (event.key === "Enter" || event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        commitNote();
        focusItem(index, false);
      }
    });
    input.addEventListener("blur", () => { if (s.editing === index) commitNote(); });
    box.appendChild(input);
    input.focus();
  }

  function commitNote() {
    if (s.editing === null) return;
    const index = s.editing;
    const item = s.items[index];
    const input = rowAt(index) && rowAt(index).querySelector(".wb-note-input");
    s.editing = null;
    if (!item || !input) return;
    const value = input.value.trim();
    const before = s.notes[item.key] || "";
    if (value) s.notes[item.key] = value; else delete s.notes[item.key];
    paint(index);
    if (value !== before) { tick(); sendWork(); }
  }

  function showCase() {
    q(".wb-context").hidden = !s.caseOpen;
    q(".wb-meta").hidden = !s.caseOpen;
    q(".wb-case").classList.toggle("wb-folded", !s.caseOpen);
    q(".wb-context-toggle").textContent = s.caseOpen ? T.case_hide || "" : T.case_show || "";
    q(".wb-context-toggle").setAttribute("aria-expanded", String(s.caseOpen));
  }

  function toggleContext() {
    s.caseOpen = !s.caseOpen;
    showCase();
  }

  function askRest() {
    if (s.readonly) return;
    const open = s.items.filter((item) => s.decisions[item.key] === null).length;
    if (!open) return;
    q(".wb-confirm-text").textContent = (T.confirm_rest || "{n}").replace("{n}", open);
    q(".wb-confirm").hidden = false;
    q(".wb-confirm-no").focus();
  }

  function markRest() {
    tick();
    q(".wb-confirm").hidden = true;
    s.items.forEach((item, index) => {
      if (s.decisions[item.key] === null) { s.decisions[item.key] = false; paint(index); }
    });
    sendWork();
    focusItem(s.focus, false);
  }

  // Fill the window below the component's top, so both panes scroll on their own.
  function fitHeight() {
    const rect = host.host ? host.host.getBoundingClientRect() : wb.getBoundingClientRect();
    const main = document.querySelector('[data-testid="stMain"]') || document.scrollingElement;
    const scrolled = main ? main.scrollTop : 0;
    const available = window.innerHeight - (rect.top + scrolled) - (data.bottom_gap || 12);
    wb.style.height = `${Math.max(data.min_height || 420, available)}px`;
  }

  q(".wb-context-toggle").onclick = () => { tick(); toggleContext(); };
  q(".wb-shared-input").onkeydown = (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) return; // the page's save
    if (event.key === "Enter" || event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      commitShared();
      focusItem(s.focus, false);
    }
  };
  q(".wb-shared-input").onblur = () => commitShared();
  q(".wb-save").onclick = () => save(true);
  q(".wb-rest").onclick = () => askRest();
  q(".wb-confirm-yes").onclick = () => markRest();
  q(".wb-confirm-no").onclick = () => { q(".wb-confirm").hidden = true; focusItem(s.focus, false); };

  const onKey = (event) => {
    if (!wb.isConnected) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      event.stopPropagation();
      save(true);
      return;
    }
    if (isTyping(event) || event.altKey || event.ctrlKey || event.metaKey) return;
    const key = event.key;
    let handled = true;
    const origin = event.composedPath ? event.composedPath()[0] : event.target;
    // Space on a button presses it (the confirmation, the save); everywhere else it reads on.
    if (key === " " && origin && origin.tagName && origin.tagName.toUpperCase() === "BUTTON") return;
    if (PICKER_KEYS.has(key) && origin && origin.getAttribute && origin.getAttribute("role") === "combobox") {
      origin.blur();
    }
    if (key === "1" || key === "y" || key === "Y") decide(s.focus, true, true);
    else if (key === "0" || key === "n" || key === "N") decide(s.focus, false, true);
    else if (data.response_keys && (key === "j" || key === "J")) { tick(); go(1); }
    else if (data.response_keys && (key === "k" || key === "K")) { tick(); go(-1); }
    else if (key === "ArrowDown" || key === "j" || key === "J") { tick(); focusItem(s.focus + 1, true); }
    else if (key === "ArrowUp" || key === "k" || key === "K") { tick(); focusItem(s.focus - 1, true); }
    else if (key === "c" || key === "C") { tick(); toggleContext(); }
    else if (key === "e" || key === "E") { tick(); editNote(s.focus); }
    else if ((key === "r" || key === "R") && T.shared_note) { tick(); q(".wb-shared-input").focus(); }
    else if (SCROLL_KEYS.has(key)) {
      tick();
      scrollResponse(key === "PageUp" || (key === " " && event.shiftKey) ? -1 : 1);
    } else handled = false;
    if (handled) { event.preventDefault(); event.stopPropagation(); resumeWork(); }
  };
  const onActivity = () => tick();
  const onResize = () => fitHeight();
  // Keys reach us wherever the focus is on the page (except while typing in a field). One set of
  // listeners at a time, whether or not the previous run's cleanup has been called.
  if (s.cleanup) s.cleanup();
  window.addEventListener("keydown", onKey, true);
  wb.addEventListener("wheel", onActivity, { passive: true });
  window.addEventListener("resize", onResize);
  s.cleanup = () => {
    window.removeEventListener("keydown", onKey, true);
    wb.removeEventListener("wheel", onActivity);
    window.removeEventListener("resize", onResize);
    s.cleanup = null;
  };
  return s.cleanup;
}
