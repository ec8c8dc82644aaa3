// The review page's keyboard and step marking (keys listed in templates/annotate/_keys_help.html).
// No inline scripts or handlers anywhere: everything is bound here, by delegation, so forms
// that htmx swaps in keep working.
(() => {
  "use strict";

  const TEXT_FREE_INPUTS = new Set(["radio", "checkbox", "button", "submit", "reset"]);
  let current = null;

  const steps = () => Array.from(document.querySelectorAll("li.step[id^='step-']"));
  const form = () => document.getElementById("annotation-form");
  const stepIndex = (li) => li.dataset.step ?? li.id.slice("step-".length);

  function isTyping(element) {
    if (element.isContentEditable) return true;
    const tag = element.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    return tag === "INPUT" && !TEXT_FREE_INPUTS.has(element.type);
  }

  function setCurrent(li, scroll) {
    if (current) current.classList.remove("current");
    current = li;
    li.classList.add("current");
    if (scroll) li.scrollIntoView({ block: "start" });
  }

  function move(delta) {
    const all = steps();
    if (!all.length) return;
    const at = all.indexOf(current);
    const next = at < 0 ? (delta > 0 ? 0 : all.length - 1) : at + delta;
    setCurrent(all[Math.min(Math.max(next, 0), all.length - 1)], true);
  }

  function changed(input) {
    input.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function field(name) {
    const f = form();
    return f ? f.elements.namedItem(name) : null;
  }

  // The first critical error; the root follows it unless it was set apart and lies earlier.
  function markCritical(index) {
    const critical = field("first_critical_step");
    const root = field("root_cause_step");
    if (!critical) return;
    if (root && (root.value === "" || root.value === critical.value || +root.value > +index)) {
      root.value = index;
    }
    critical.value = index;
    const verdict = form().querySelector("input[name='verdict']:checked");
    const failure = form().querySelector("input[name='verdict'][value='failure']");
    if (!verdict && failure) failure.checked = true;
    changed(critical);
  }

  function markRoot(index) {
    const root = field("root_cause_step");
    if (!root) return;
    root.value = index;
    changed(root);
  }

  function pickCategory(number) {
    const f = form();
    const radio = f && f.querySelectorAll("input[name='error_category']")[number - 1];
    if (!radio) return;
    radio.checked = true;
    changed(radio);
  }

  function clickIfPresent(id) {
    const element = document.getElementById(id);
    if (element) element.click();
  }

  function toggleHelp() {
    const help = document.getElementById("keys-help");
    if (help) help.hidden = !help.hidden;
  }

  // Outline the steps the form names as critical and root.
  function showMarks() {
    const critical = field("first_critical_step");
    const root = field("root_cause_step");
    for (const li of steps()) {
      const index = stepIndex(li);
      li.classList.toggle("marked-critical", Boolean(critical) && critical.value === index);
      li.classList.toggle("marked-root", Boolean(root) && root.value === index);
    }
  }

  function addMarkButtons() {
    if (!form()) return;
    for (const li of steps()) {
      const header = li.querySelector("header") || li;
      const marks = document.createElement("span");
      marks.className = "step-marks";
      for (const [mark, text] of [["critical", "critical (c)"], ["root", "root (r)"]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.dataset.mark = mark;
        button.textContent = text;
        marks.append(button);
      }
      header.append(marks);
    }
  }

  // The step critic's suggestion (templates/annotate/_critic_suggestion.html): outlined, and a
  // placeholder in the empty critical step field; never a value until the annotator marks it.
  function showSuggestion() {
    const card = document.getElementById("critic-suggestion");
    const critical = field("first_critical_step");
    if (!card) return null;
    const li = document.getElementById(`step-${card.dataset.step}`);
    if (li) li.classList.add("suggested");
    if (critical) critical.placeholder = `suggested: ${card.dataset.step}`;
    return li;
  }

  const KEYS = {
    j: () => move(1),
    k: () => move(-1),
    c: () => current && markCritical(stepIndex(current)),
    r: () => current && markRoot(stepIndex(current)),
    s: () => clickIfPresent("annotation-submit"),
    n: () => {
      const next = document.getElementById("queue-next");
      if (next) window.location.assign(next.href);
    },
    "?": toggleHelp,
  };

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (isTyping(event.target)) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    if (/^[1-9]$/.test(event.key)) {
      pickCategory(Number(event.key));
    } else if (KEYS[event.key]) {
      KEYS[event.key]();
    } else {
      return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", (event) => {
    if (event.target.closest("[data-keys-toggle]")) toggleHelp();
    const li = event.target.closest("li.step[id^='step-']");
    if (!li) return;
    setCurrent(li, false);
    const button = event.target.closest("button[data-mark]");
    if (button && button.dataset.mark === "critical") markCritical(stepIndex(li));
    if (button && button.dataset.mark === "root") markRoot(stepIndex(li));
  });

  document.addEventListener("click", (event) => {
    const use = event.target.closest("[data-use-suggestion]");
    const card = document.getElementById("critic-suggestion");
    if (!use || !card) return;
    const li = document.getElementById(`step-${card.dataset.step}`);
    if (li) setCurrent(li, true);
    markCritical(card.dataset.step);
  });

  document.addEventListener("input", (event) => {
    if (event.target.form && event.target.form.id === "annotation-form") showMarks();
  });
  document.addEventListener("htmx:afterSettle", () => {
    showMarks();
    showSuggestion();
  });

  document.addEventListener("DOMContentLoaded", () => {
    addMarkButtons();
    showMarks();
    const suggested = showSuggestion();
    const target = document.getElementById(window.location.hash.slice(1));
    if (target && target.matches("li.step")) setCurrent(target, false);
    else if (suggested) setCurrent(suggested, false);
  });
})();
