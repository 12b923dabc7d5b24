// The room board's page script (labkit/workshop/board): fetches api/grid every few seconds and updates the two
// tables in place, without a reload. Why this shape: every name, mistake and reason is text a learner (or their
// hub name) controls, so it is written with textContent and setAttribute only, never as HTML; the page has no
// inline script, so the Content-Security-Policy allows scripts from the board alone. A row is updated, not
// replaced, so a keyboard user's focus on a link stays where it is.
"use strict";

(function () {
  const body = document.body;
  const gridUrl = body.dataset.gridUrl;
  const xsrf = body.dataset.xsrf;
  const pollMs = Number(body.dataset.pollMs) || 2000;
  const status = document.getElementById("board-status");
  const updated = document.getElementById("board-updated");
  const grid = document.getElementById("board-grid");
  const exercises = document.getElementById("board-exercises");
  const words = JSON.parse(body.dataset.words);  // the room's language (board/words.py)
  const SOLVED = words.solved_cell;

  function fill(text, fields) {  // "{name}" fields, as Python's str.format fills them
    return text.replace(/\{(\w+)\}/g, (whole, name) => (name in fields ? String(fields[name]) : whole));
  }

  function clock(seconds) {
    return new Date(seconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function slug(state) {
    return state.replace(/[^a-z]+/g, "-");
  }

  function element(name, className, text) {
    const node = document.createElement(name);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function setClass(node, className) {
    if (node.className !== className) node.className = className;
  }

  function setAttribute(node, name, value) {
    if (node.getAttribute(name) !== value) node.setAttribute(name, value);
  }

  function say(text) {
    setText(status, text);
  }

  function cellText(cell) {
    if (cell.state === "solved" && cell.solved_at !== null && cell.text.startsWith(SOLVED)) {
      return SOLVED + " " + clock(cell.solved_at) + cell.text.slice(SOLVED.length);
    }
    return cell.text;
  }

  // The header row: rebuilt only when the exercises change.
  function renderHeader(names) {
    const row = grid.tHead.rows[0];
    const wanted = [words.learner, words.preflight].concat(names, [words.last_activity, words.version, words.stuck_question]);
    const have = Array.from(row.cells, (cell) => cell.textContent);
    if (have.join("\n") === wanted.join("\n")) return;
    row.replaceChildren(...wanted.map((name) => {
      const th = element("th", "", name);
      th.setAttribute("scope", "col");
      return th;
    }));
  }

  function newLearnerRow(learner) {
    const tr = element("tr");
    tr.dataset.learner = learner;
    const th = element("th");
    th.setAttribute("scope", "row");
    th.append(element("span", "name", learner), " ", element("a", "server", words.server));
    tr.append(th);
    return tr;
  }

  function updateLearnerRow(tr, row) {
    setClass(tr, row.stuck.length ? "stuck" : "");
    const link = tr.querySelector("a.server");
    setAttribute(link, "href", row.server_url);
    setAttribute(link, "title", row.server_title);
    setAttribute(link, "aria-label", fill(words.open_server, { name: row.learner }));
    const texts = [["preflight state-" + slug(row.preflight.state), row.preflight.text]];
    for (const cell of row.cells) texts.push(["cell state-" + slug(cell.state), cellText(cell)]);
    texts.push(["last", row.last_activity === null ? words.no_event_yet : clock(row.last_activity)]);
    texts.push(["version", row.version_text]);
    texts.push(["why", row.stuck.length ? fill(words.stuck_because, { reasons: row.stuck.join("; ") }) : words.not_stuck]);
    while (tr.cells.length - 1 > texts.length) tr.lastElementChild.remove();
    texts.forEach(([className, text], index) => {
      let td = tr.cells[index + 1];
      if (!td) td = tr.appendChild(element("td"));
      setClass(td, className);
      setText(td, text);
    });
  }

  function newExerciseRow(exercise) {
    const tr = element("tr");
    tr.dataset.exercise = exercise;
    const th = element("th", "", exercise);
    th.setAttribute("scope", "row");
    tr.append(th, element("td", "solved"), element("td", "hints"), element("td", "mistakes"));
    return tr;
  }

  function updateExerciseRow(tr, summary) {
    setText(tr.cells[1], summary.solved_text);
    setText(tr.cells[2], String(summary.hints));
    const mistakes = tr.cells[3];
    const lines = summary.mistakes.map((count) => count.line);
    const shown = Array.from(mistakes.querySelectorAll("li"), (li) => li.textContent);
    if (!lines.length) {
      if (mistakes.textContent !== words.none_yet) mistakes.replaceChildren(words.none_yet);
    } else if (shown.join("\n") !== lines.join("\n")) {
      const list = element("ol");
      for (const line of lines) list.append(element("li", "", line));
      mistakes.replaceChildren(list);
    }
  }

  // Keep one <tr> per key, in the order of `items`, moving a row only when it is out of place.
  function renderRows(tbody, items, key, attribute, create, update) {
    const existing = new Map();
    for (const tr of Array.from(tbody.rows)) existing.set(tr.dataset[attribute], tr);
    let previous = null;
    for (const item of items) {
      let tr = existing.get(item[key]);
      if (tr) existing.delete(item[key]);
      else tr = create(item[key]);
      update(tr, item);
      const expected = previous ? previous.nextElementSibling : tbody.firstElementChild;
      if (expected !== tr) tbody.insertBefore(tr, expected);
      previous = tr;
    }
    for (const tr of existing.values()) tr.remove();
  }

  function render(data) {
    renderHeader(data.exercises);
    renderRows(grid.tBodies[0], data.rows, "learner", "learner", newLearnerRow, updateLearnerRow);
    renderRows(exercises.tBodies[0], data.summaries, "exercise", "exercise", newExerciseRow, updateExerciseRow);
    setText(updated, fill(words.shown_as_of, { time: clock(data.now) }));
  }

  async function refresh() {
    try {
      const reply = await fetch(gridUrl, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { "Accept": "application/json", "X-XSRFToken": xsrf },
      });
      if (reply.status === 403) {
        say(words.logged_out);
      } else if (!reply.ok) {
        say(fill(words.not_updated, { status: reply.status }));
      } else {
        render(await reply.json());
        say("");
      }
    } catch (error) {
      say(words.unreachable);
    }
    window.setTimeout(refresh, pollMs);
  }

  refresh();  // at once: the times then read in the browser's own time zone, not the server's
})();
