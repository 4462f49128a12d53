// The state list: filters and pages over the compact index in data/ (no server, no network).
// Every string shown comes from a session or a teacher, so it is set with textContent, never as HTML.
(function () {
  "use strict";
  var R = window.REPLAY || { meta: {}, rows: [] };
  var M = R.meta, rows = R.rows, PAGE = 100, page = 0;
  var form = document.getElementById("filters");
  var body = document.querySelector("#list tbody");
  var FIELDS = { verdict: "verdict", teacher: "teacher", tool: "tool", tier: "tier", outcome: "outcome" };

  function options(select, values) {
    values.slice().sort().forEach(function (v) {
      var o = document.createElement("option"); o.value = v; o.textContent = v.replace(/_/g, " ");
      select.appendChild(o);
    });
  }
  Object.keys(FIELDS).forEach(function (k) { options(form.elements[k], M[FIELDS[k]] || []); });
  var list = document.getElementById("traces");
  (M.trace || []).forEach(function (t) { var o = document.createElement("option"); o.value = t; list.appendChild(o); });

  function wanted() {
    var w = {};
    ["verdict", "teacher", "tool", "tier", "outcome", "trace"].forEach(function (k) { w[k] = form.elements[k].value; });
    return w;
  }
  function code(table, value) { return (M[table] || []).indexOf(value); }
  function matches(row, w, c) {
    if (w.verdict && row[1] !== c.verdict) return false;
    if (w.teacher && row[5].indexOf(c.teacher) < 0 && row[6].indexOf(c.teacher) < 0) return false;
    if (w.tool && row[4].indexOf(c.tool) < 0) return false;
    if (w.tier && row[7] !== c.tier) return false;
    if (w.outcome && row[10] !== c.outcome) return false;
    if (w.trace && M.trace[row[2]].indexOf(w.trace) !== 0) return false;
    return true;
  }
  function cell(tr, text, cls) {
    var td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); return td;
  }
  function names(table, codes) { return codes.map(function (i) { return M[table][i]; }).join(", "); }
  function draw(reset) {
    var w = wanted(), c = {
      verdict: code("verdict", w.verdict), teacher: code("teacher", w.teacher),
      tool: code("tool", w.tool), tier: code("tier", w.tier), outcome: code("outcome", w.outcome) };
    var hits = rows.filter(function (r) { return matches(r, w, c); });
    if (reset) page = 0;
    var pages = Math.max(1, Math.ceil(hits.length / PAGE));
    page = Math.min(page, pages - 1);
    body.textContent = "";
    hits.slice(page * PAGE, (page + 1) * PAGE).forEach(function (r) {
      var tr = document.createElement("tr");
      var a = document.createElement("a"); a.href = "state.html#" + r[0]; a.textContent = String(r[0]);
      var td = document.createElement("td"); td.appendChild(a); tr.appendChild(td);
      cell(tr, M.trace[r[2]]); cell(tr, String(r[3]), "num");
      var v = document.createElement("span"); v.className = "verdict v-" + M.verdict[r[1]];
      v.textContent = M.verdict[r[1]].replace(/_/g, " ");
      cell(tr, "").appendChild(v);
      cell(tr, r[9], "action").title = r[9];
      cell(tr, names("teacher", r[5])); cell(tr, names("teacher", r[6]));
      cell(tr, r[7] >= 0 ? M.tier[r[7]] : ""); cell(tr, r[8] === null ? "" : r[8].toFixed(2), "num");
      cell(tr, r[10] >= 0 ? M.outcome[r[10]].replace(/_/g, " ") : "");
      body.appendChild(tr);
    });
    document.getElementById("shown").textContent = hits.length + " of " + rows.length + " states";
    document.getElementById("page").textContent = "page " + (page + 1) + " of " + pages;
    var params = new URLSearchParams();
    Object.keys(w).forEach(function (k) { if (w[k]) params.set(k, w[k]); });
    try { history.replaceState(null, "", "#" + params.toString()); } catch (e) { /* some file:// pages */ }
  }
  var start = new URLSearchParams(location.hash.slice(1));
  start.forEach(function (v, k) { if (form.elements[k]) form.elements[k].value = v; });
  form.addEventListener("input", function () { draw(true); });
  form.addEventListener("submit", function (e) { e.preventDefault(); });
  document.getElementById("prev").addEventListener("click", function () { page -= 1; if (page < 0) page = 0; draw(false); });
  document.getElementById("next").addEventListener("click", function () { page += 1; draw(false); });
  draw(false);
})();
