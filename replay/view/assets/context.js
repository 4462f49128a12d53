// A state page's context: the items its trace's data/ files hold, in the ranges the page names.
// Session text is untrusted: every string is set with textContent, never as HTML.
(function () {
  "use strict";
  var box = document.getElementById("context");
  if (!box) return;
  var items = {};
  (window.REPLAY_CONTEXT || []).forEach(function (chunk) {
    chunk[1].forEach(function (it, j) { items[chunk[0] + j] = it; });
  });
  var shown = [];
  JSON.parse(box.getAttribute("data-ranges")).forEach(function (r) {
    for (var i = r[0]; i < r[1]; i++) shown.push(items[i]);
  });
  var recent = parseInt(box.getAttribute("data-recent"), 10);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function message(it) {               // [role, text, note, [[tool, arguments], ...]]
    var div = el("div", "msg " + it[0]), role = el("div", "role", it[0]);
    if (it[2]) { role.appendChild(document.createTextNode(" ")); role.appendChild(el("span", "note", it[2])); }
    div.appendChild(role);
    if (it[1]) div.appendChild(el("pre", "text", it[1]));
    it[3].forEach(function (call) {
      var c = el("div", "call");
      c.appendChild(el("span", "tool", call[0])); c.appendChild(el("pre", undefined, call[1]));
      div.appendChild(c);
    });
    return div;
  }
  function folded(summary, list) {
    var d = el("details"); d.appendChild(el("summary", undefined, summary));
    list.forEach(function (it) { d.appendChild(message(it)); });
    return d;
  }
  if (shown.some(function (it) { return it === undefined; })) {
    box.appendChild(el("p", "meta", "This page's context files are missing from data/."));
    return;
  }
  if (box.getAttribute("data-system") === "1" && shown.length) {
    box.appendChild(folded("system prompt", [shown.shift()]));
  }
  var split = Math.max(0, shown.length - recent);
  if (split) box.appendChild(folded(split + " older messages", shown.slice(0, split)));
  shown.slice(split).forEach(function (it) { box.appendChild(message(it)); });
})();
