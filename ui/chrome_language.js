// Streamlit's own widget texts in the page's language: the placeholders, aria labels and button words
// Streamlit writes in English whatever the page ("Choose an option", "Help for …", "Upload", "Search"),
// and the chart toolbar's titles. Python sends `data`: the page's language, `exact` pairs (English →
// ours) and `patterns` ("Help for {label}" → "{label}的说明"). A MutationObserver translates what
// Streamlit draws later; the English original is kept on the element, so a switch back restores it.
// Only Streamlit's fixed English strings are matched (whole value), so no data is ever rewritten.

const ATTRIBUTES = ["aria-label", "placeholder", "title", "data-title"];
const ORIGINAL = "ccOriginal";
const state = window.__ccChromeLanguage || (window.__ccChromeLanguage = { exact: new Map(), patterns: [], observer: null });

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function compile(pattern) {
  // "Help for {label}" → /^Help for (.+)$/ and its replacement "{label}的说明".
  const [english, ours] = pattern;
  const source = "^" + escapeRegExp(english).replace(/\\\{label\\\}/g, "(.+)") + "$";
  return { regex: new RegExp(source, "s"), ours };
}

function translated(english) {
  if (state.exact.has(english)) return state.exact.get(english);
  for (const { regex, ours } of state.patterns) {
    const match = regex.exec(english);
    if (match) return ours.replace("{label}", match[1]);
  }
  return null;
}

function originals(node) {
  if (!node[ORIGINAL]) node[ORIGINAL] = {};
  return node[ORIGINAL];
}

function translateAttribute(node, name) {
  const value = node.getAttribute(name);
  if (value === null) return;
  const kept = originals(node);
  // Streamlit may have set a new English value since: that is the original now.
  const english = kept[name] && value === kept[name].ours ? kept[name].english : value;
  const ours = translated(english);
  if (ours === null) {
    delete kept[name];
    return;
  }
  kept[name] = { english, ours };
  if (value !== ours) node.setAttribute(name, ours);
}

function translateText(textNode) {
  const value = textNode.nodeValue;
  if (!value || !value.trim()) return;
  const kept = originals(textNode);
  const english = kept.text && value === kept.text.ours ? kept.text.english : value.trim();
  const ours = translated(english);
  if (ours === null) {
    delete kept.text;
    return;
  }
  kept.text = { english, ours };
  if (value !== ours) textNode.nodeValue = ours;
}

function restore(node) {
  const kept = node[ORIGINAL];
  if (!kept) return;
  for (const [name, pair] of Object.entries(kept)) {
    if (name === "text") {
      if (node.nodeValue === pair.ours) node.nodeValue = pair.english;
    } else if (node.getAttribute(name) === pair.ours) {
      node.setAttribute(name, pair.english);
    }
  }
  delete node[ORIGINAL];
}

function visit(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
  for (let node = walker.currentNode; node; node = walker.nextNode()) {
    if (state.exact.size === 0) {
      restore(node);
    } else if (node.nodeType === Node.TEXT_NODE) {
      translateText(node);
    } else {
      for (const name of ATTRIBUTES) translateAttribute(node, name);
    }
  }
}

function observe() {
  if (state.observer) return;
  state.observer = new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === "attributes") {
        if (state.exact.size) translateAttribute(record.target, record.attributeName);
      } else if (record.type === "characterData") {
        if (state.exact.size) translateText(record.target);
      } else {
        for (const node of record.addedNodes) visit(node);
      }
    }
  });
  state.observer.observe(document.body, {
    subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ATTRIBUTES,
  });
}

export default function (component) {
  const { data } = component;
  if (!data) return;
  state.exact = new Map(data.exact || []);
  state.patterns = (data.patterns || []).map(compile);
  observe();
  visit(document.body);
  document.documentElement.dataset.ccChromeLanguage = data.lang;
}
