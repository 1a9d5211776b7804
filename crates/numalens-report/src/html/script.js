// Sorting of the tables marked "sortable": a click on a heading sorts by that column, a second
// click reverses. Numeric cells carry their exact value in data-v.
(function () {
  "use strict";
  function key(cell, numeric) {
    if (!cell) return numeric ? -Infinity : "";
    if (numeric) {
      var v = parseFloat(cell.getAttribute("data-v") || cell.textContent.replace(/[^0-9.eE+-]/g, ""));
      return isNaN(v) ? -Infinity : v;
    }
    return cell.textContent.toLowerCase();
  }
  function sort(table, index, numeric, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[index], numeric), y = key(b.cells[index], numeric);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, index) {
      var type = th.getAttribute("data-type");
      if (!type) return;
      th.addEventListener("click", function () {
        // Numbers sort largest first on the first click, text from A.
        var descending = th.classList.contains("desc") ? false
          : th.classList.contains("asc") ? true : type === "n";
        Array.prototype.forEach.call(heads, function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(descending ? "desc" : "asc");
        sort(table, index, type === "n", descending);
      });
    });
  });
  // Following a link to an object opens its details.
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") target.open = true;
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
