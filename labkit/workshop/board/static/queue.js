// The help queue on the room board (labkit/workshop/board/queue_app.py): fetches api/queue every few seconds and
// redraws its table; Claim and Close are POSTs carrying the page's XSRF token (no GET changes anything). Every field
// is written with textContent or setAttribute, never as HTML: the learner's name is hers, and the board checked
// the exercise and mistake ids, but the page trusts neither. A redraw keeps the keyboard's place: the focused
// button's request and action are noted and the new row's button takes the focus (Close, once Claim is gone).
"use strict";

(function () {
  const body = document.body;
  const section = document.getElementById("board-queue");
  if (!section) return;
  const table = document.getElementById("board-queue-table");
  const empty = section.querySelector("p.empty");
  const xsrf = body.dataset.xsrf;
  const pollMs = Number(body.dataset.pollMs) || 2000;

  function element(name, text) {
    const node = document.createElement(name);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fill(text, fields) {
    return text.replace(/\{(\w+)\}/g, (whole, name) => (name in fields ? String(fields[name]) : whole));
  }

  function waited(words, seconds) {
    return fill(words.minutes_seconds, { minutes: Math.floor(seconds / 60), seconds: seconds % 60 });
  }

  async function act(id, action) {
    await fetch(section.dataset.actionUrl + encodeURIComponent(id) + "/" + action, {
      method: "POST", credentials: "same-origin", cache: "no-store", headers: { "X-XSRFToken": xsrf },
    });
    refresh(false);
  }

  function button(text, id, action) {
    const node = element("button", text);
    node.type = "button";
    node.className = action;
    node.addEventListener("click", () => act(id, action));
    return node;
  }

  function render(data) {
    const words = data.words;
    section.querySelector("h2").textContent = words.title;
    table.caption.textContent = words.caption;
    const head = [words.learner, words.exercise, words.mistake, words.hint_level, words.waiting, words.look,
                  words.claimed_by, words.actions];
    table.tHead.rows[0].replaceChildren(...head.map((text) => {
      const th = element("th", text);
      th.setAttribute("scope", "col");
      return th;
    }));
    const rows = data.requests.map((request) => {
      const tr = element("tr");
      tr.dataset.request = request.id;
      tr.dataset.learner = request.learner;
      const look = element("td");
      if (request.look && request.server_url) {
        const link = element("a", fill(words.open_look, { name: request.learner }));
        link.className = "look";
        link.setAttribute("href", request.server_url);
        link.setAttribute("target", "_blank");
        link.setAttribute("rel", "noopener noreferrer");
        look.append(link);
      } else {
        look.textContent = words.no_look;
      }
      const actions = element("td");
      if (!request.claimed_by) actions.append(button(words.claim, request.id, "claim"), " ");
      actions.append(button(words.close, request.id, "close"));
      const learner = element("th", request.learner);
      learner.setAttribute("scope", "row");
      tr.append(learner, element("td", request.exercise), element("td", request.mistake),
                element("td", String(request.hint_level)), element("td", waited(words, request.waiting_s)), look,
                element("td", request.claimed_by || words.nobody), actions);
      return tr;
    });
    const focused = focusedButton();
    table.tBodies[0].replaceChildren(...rows);
    if (focused) refocus(focused);
    const median = data.median_wait_s === null ? "" : fill(words.median_wait, { wait: waited(words, data.median_wait_s) });
    empty.textContent = (rows.length ? "" : words.empty + " ") + median;
  }

  function focusedButton() {
    const active = document.activeElement;
    if (!active || active.tagName !== "BUTTON" || !table.tBodies[0].contains(active)) return null;
    return { request: active.closest("tr").dataset.request, action: active.className };
  }

  function refocus(focused) {
    const row = Array.from(table.tBodies[0].rows).find((tr) => tr.dataset.request === focused.request);
    if (!row) return;
    const target = row.querySelector("button." + focused.action) || row.querySelector("button.close");
    if (target) target.focus();
  }

  async function refresh(again) {
    try {
      const reply = await fetch(section.dataset.queueUrl, {
        credentials: "same-origin", cache: "no-store", headers: { "Accept": "application/json", "X-XSRFToken": xsrf },
      });
      if (reply.ok) render(await reply.json());
    } catch (error) {
      // board.js says when the board cannot be reached
    }
    if (again) window.setTimeout(() => refresh(true), pollMs);
  }

  refresh(true);
})();
