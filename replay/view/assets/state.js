// A state's page, drawn from its trace's files in data/: the state's record (verdict, actions, teachers'
// groups, diff) and the context items in the ranges the page names. Session and teacher text is
// untrusted: every string is set with textContent, never as HTML.
(function () {
  "use strict";
  var main = document.getElementById("state");
  var n = main.getAttribute("data-n"), items = {}, rec = null;
  (window.REPLAY_PAGES || []).forEach(function (chunk) {     // [first item, [items], {number: record}]
    chunk[1].forEach(function (it, j) { items[chunk[0] + j] = it; });
    if (chunk[2][n]) rec = chunk[2][n];
  });
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function words(s) { return String(s).replace(/_/g, " "); }
  function message(it, cls) {          // [role, text, note, [[tool, arguments], ...]]
    var div = el("div", "msg " + it[0] + (cls ? " " + cls : "")), role = add(div, el("div", "role", it[0]));
    if (it[2]) { role.appendChild(document.createTextNode(" ")); add(role, el("span", "note", it[2])); }
    if (it[1]) add(div, el("pre", "text", it[1]));
    it[3].forEach(function (call) {
      var c = add(div, el("div", "call"));
      add(c, el("span", "tool", call[0])); add(c, el("pre", null, call[1]));
    });
    return div;
  }
  function folded(summary, list) {
    var d = el("details"); add(d, el("summary", null, summary));
    list.forEach(function (it) { add(d, message(it)); });
    return d;
  }
  if (!rec) { add(main, el("p", "meta", "This page's files are missing from data/.")); return; }

  var pager = add(main, el("p", "pager"));
  if (rec.prev) { var a = add(pager, el("a", null, "‹ previous turn")); a.href = rec.prev; }
  pager.appendChild(document.createTextNode(" "));
  if (rec.next) { var b = add(pager, el("a", null, "next turn ›")); b.href = rec.next; }
  add(main, el("h1", null, rec.trace + " · turn " + rec.turn));
  var summary = add(main, el("p", "meta")); summary.id = "summary";
  add(summary, el("span", "verdict v-" + rec.verdict, words(rec.verdict)));
  function part(label, value, id, cls) {
    summary.appendChild(document.createTextNode(" · " + label + " "));
    var s = add(summary, el(cls === "code" ? "code" : "span", cls === "code" ? null : cls, value));
    if (id) s.id = id;
  }
  if (rec.agreement !== null) { part("agreement", rec.agreement.toFixed(2)); part("method", rec.method); }
  if (rec.match) part("match", rec.match, "tier");
  if (rec.reason) summary.appendChild(document.createTextNode(" · " + words(rec.reason)));
  if (rec.outcome) part("outcome", words(rec.outcome), "outcome", "outcome o-" + rec.outcome);
  if (rec.recovery) part("recovery", rec.recovery, null, "code");
  part("student", rec.model, null, "code");
  summary.appendChild(document.createTextNode(" · ")); add(summary, el("code", null, rec.id));

  if (rec.verdict === "pair" && rec.chosen) {
    add(main, el("h2", null, "Chosen and rejected"));
    var sides = add(main, el("div", "sides")); sides.id = "pair";
    var left = add(sides, el("div")), right = add(sides, el("div"));
    add(left, el("h3", null, "chosen: the teachers' consensus")); add(left, message(rec.chosen, "chosen"));
    add(right, el("h3", null, "rejected: the student's action")); add(right, message(rec.student, "rejected"));
    add(main, el("h3", null, "Tool calls, rejected → chosen"));
    var diff = add(main, el("pre", "diff")); diff.id = "diff";
    var mark = { add: "+ ", del: "- ", same: "  " };
    rec.diff.forEach(function (d) { add(diff, el("span", d[0], mark[d[0]] + d[1])); });
  } else {
    add(main, el("h2", null, "The student's action"));
    var student = add(main, el("div")); student.id = "student";
    add(student, message(rec.student, "student"));
    if (rec.thinking) {
      var t = add(main, el("details")); add(t, el("summary", null, "the student's thinking"));
      add(t, el("pre", "text", rec.thinking));
    }
  }
  if (rec.errors.length) {
    var ul = add(main, el("ul", "errors")); ul.id = "outcome-calls";
    rec.errors.forEach(function (e) {            // [tool, kind, exit code, error head]
      var li = add(ul, el("li")); add(li, el("code", null, e[0]));
      li.appendChild(document.createTextNode(" " + words(e[1]) + (e[2] !== null ? " (exit " + e[2] + ")" : "") + ": "));
      add(li, el("span", "text", e[3]));
    });
  }
  if (rec.groups.length || rec.failed.length || rec.excluded.length) {
    add(main, el("h2", null, "Teachers"));
    rec.groups.forEach(function (g, i) {
      var box = add(main, el("div", "group" + (g.winner ? " winner" : "")));
      add(box, el("h3", null, (g.winner ? "winning group" : "group " + (i + 1)) + " · weight " + g.weight +
                  " · " + g.teachers.join(", ")));
      g.members.forEach(function (it) { add(box, message(it)); });
    });
    if (rec.failed.length) {
      var f = add(main, el("div", "group failed")); add(f, el("h3", null, "no valid answer"));
      rec.failed.forEach(function (it) { add(f, message(it)); });
    }
    if (rec.excluded.length) {
      add(main, el("p", "meta", "Excluded (same family as the student): " + rec.excluded.join(", ")));
    }
  }

  add(main, el("h2", null, "Context"));
  var dropped = parseInt(main.getAttribute("data-dropped"), 10);
  if (dropped) {
    add(main, el("p", "meta", dropped + " older messages are not shown (this page's size budget); all are in states.jsonl."));
  }
  var box = add(main, el("div")); box.id = "context";
  var shown = [];
  JSON.parse(main.getAttribute("data-ranges")).forEach(function (r) {
    for (var i = r[0]; i < r[1]; i++) shown.push(items[i]);
  });
  if (shown.some(function (it) { return it === undefined; })) {
    add(box, el("p", "meta", "This page's context files are missing from data/."));
    return;
  }
  if (main.getAttribute("data-system") === "1" && shown.length) add(box, folded("system prompt", [shown.shift()]));
  var recent = parseInt(main.getAttribute("data-recent"), 10), split = Math.max(0, shown.length - recent);
  if (split) add(box, folded(split + " older messages", shown.slice(0, split)));
  shown.slice(split).forEach(function (it) { add(box, message(it)); });
})();
