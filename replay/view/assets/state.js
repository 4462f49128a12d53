// One page for every state: state.html#N draws state N from the run's files in data/. where.js lists
// the first state of each record block (s<first>.js); a state's record names the item files (c<k>.js)
// its context is in, and its trace's segment there; each file is loaded once, as a script (pages opened
// from disk may not fetch). Session and teacher text is untrusted: every string is set with
// textContent, never as HTML.
(function () {
  "use strict";
  var root = document.getElementById("state"), RECENT = 4, asked = {};
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function words(s) { return String(s).replace(/_/g, " "); }
  function files() { return window.REPLAY_FILES || {}; }
  function load(keys, done) {          // the data/ files not loaded yet, then done()
    var left = 0;
    keys.forEach(function (key) {
      if (key in files() || asked[key]) return;
      asked[key] = true; left += 1;
      var s = document.createElement("script");
      s.src = "data/" + key + ".js";
      s.onload = s.onerror = function () { left -= 1; if (!left) done(); };
      document.head.appendChild(s);
    });
    if (!left) done();
  }
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
  function show() {
    var n = parseInt(location.hash.slice(1), 10), where = window.REPLAY_WHERE || [], block = -1;
    root.textContent = "";
    for (var i = 0; i < where.length && where[i] <= n; i++) block = where[i];
    function none() {
      var p = add(root, el("p", "meta", "No state " + location.hash.slice(1) + " in this run: pick one from the "));
      add(p, el("a", null, "list of states")).href = "states.html";
    }
    if (!(n >= 0) || block < 0) { none(); return; }
    load(["s" + block], function () {
      var found = files()["s" + block], rec = found && found[n - block];
      if (!found) { add(root, el("p", "meta", "This state's files are missing from data/.")); return; }
      if (!rec) { none(); return; }
      var c = rec.context;
      load(c.files.map(function (k) { return "c" + k; }), function () { draw(rec); });
    });
  }
  function draw(rec) {
    var main = root;
    document.title = rec.trace + " · " + rec.turn + " · teacher-replay";
    var pager = add(main, el("p", "pager"));
    if (rec.prev !== null) { var a = add(pager, el("a", null, "‹ previous turn")); a.href = "#" + rec.prev; }
    pager.appendChild(document.createTextNode(" "));
    if (rec.next !== null) { var b = add(pager, el("a", null, "next turn ›")); b.href = "#" + rec.next; }
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
    if (rec.verify) {                              // replay.verify: what happened next, per branch
      var v = rec.verify;
      add(main, el("h2", null, "Checked by the environment"));
      var vs = add(main, el("p", "meta")); vs.id = "verify";
      add(vs, el("span", "verdict v-" + v.outcome, words(v.outcome)));
      function shown(x) { return x[0] === null ? "no graded branch" : x[0].toFixed(2) + " [" + x[1][0] + ", " + x[1][1] + "]"; }
      vs.appendChild(document.createTextNode(" · chosen " + shown(v.chosen) + " · rejected " + shown(v.rejected) +
        (v.difference ? " · difference [" + v.difference[0] + ", " + v.difference[1] + "]" : "") +
        " · restore mismatches " + v.mismatches + (v.reason ? " · " + words(v.reason) : "")));
      if (v.branches.length) {
        var table = add(main, el("table", "list")); table.id = "branches";
        var head = add(table, el("tr"));
        ["action", "sample", "reward", "ended", "turns", "restored by", "mismatches", "error"].forEach(function (h) { add(head, el("th", null, h)); });
        v.branches.forEach(function (b) {           // [action, sample, reward, ended, turns, restored by, mismatches, error]
          var tr = add(table, el("tr"));
          b.forEach(function (x) { add(tr, el("td", null, x === null ? "—" : String(x))); });
        });
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
    var c = rec.context, items = {};
    c.files.forEach(function (k) {                 // parts: [segment, first item, [items]]
      (files()["c" + k] || []).forEach(function (part) {
        if (part[0] === c.seg) part[2].forEach(function (it, j) { items[part[1] + j] = it; });
      });
    });
    if (c.dropped) {
      add(main, el("p", "meta", c.dropped + " older messages are not shown (this page's size budget); all are in states.jsonl."));
    }
    var box = add(main, el("div")); box.id = "context";
    var shown = [];
    c.ranges.forEach(function (r) {
      for (var i = r[0]; i < r[1]; i++) shown.push(items[i]);
    });
    if (shown.some(function (it) { return it === undefined; })) {
      add(box, el("p", "meta", "This state's context files are missing from data/."));
      return;
    }
    if (c.system && shown.length) add(box, folded("system prompt", [shown.shift()]));
    var split = Math.max(0, shown.length - RECENT);
    if (split) add(box, folded(split + " older messages", shown.slice(0, split)));
    shown.slice(split).forEach(function (it) { add(box, message(it)); });
    // When the page was drawn, from its navigation: what the page costs, without the browser's start.
    root.setAttribute("data-drawn-ms", String(Math.round(performance.now())));
  }
  window.addEventListener("hashchange", function () { show(); window.scrollTo(0, 0); });
  show();
})();
