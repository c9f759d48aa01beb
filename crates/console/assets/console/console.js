// The chargeonce operator console's only script (no framework, no CDN):
// confirmation dialogs on forms that ask for one, and the overview's
// charts redrawn from /console/api/overview every few seconds.
"use strict";

document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form && form.getAttribute && form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

// Points of a sparkline of `values` in a 240 x 48 box (as the server draws them).
function points(values) {
  var width = 240, height = 48, bottom = height - 2;
  if (!values.length) { return "0," + bottom + " " + width + "," + bottom; }
  var max = Math.max.apply(null, values.concat([1]));
  var n = Math.max(values.length, 2) - 1;
  return values.map(function (v, i) {
    var x = Math.floor(i * width / n);
    var y = bottom - Math.floor(v * (height - 4) / max);
    return x + "," + y;
  }).join(" ");
}

function redraw(overview) {
  var series = overview.series || {};
  Object.keys(series).forEach(function (name) {
    var values = series[name];
    var svg = document.querySelector('svg[data-chart="' + name + '"]');
    if (!svg) { return; }
    var line = svg.querySelector("polyline");
    if (line) { line.setAttribute("points", points(values)); }
    var last = document.querySelector('[data-chart-last="' + name + '"]');
    if (last) { last.textContent = values.length ? values[values.length - 1] : 0; }
    var max = document.querySelector('[data-chart-max="' + name + '"]');
    if (max) { max.textContent = values.length ? Math.max.apply(null, values) : 0; }
  });
  var counts = overview.counts || {};  // null when the store did not answer
  [["count-pending", "pending_payments"], ["count-findings", "open_findings"],
   ["count-undelivered", "undelivered_events"]].forEach(function (pair) {
    var el = document.querySelector('[data-testid="' + pair[0] + '"]');
    if (el && counts[pair[1]] !== undefined) { el.textContent = counts[pair[1]]; }
  });
}

function poll() {
  fetch("/console/api/overview", { credentials: "same-origin", headers: { "Accept": "application/json" } })
    .then(function (answer) { return answer.ok ? answer.json() : null; })
    .then(function (overview) { if (overview) { redraw(overview); } })
    .catch(function () { /* the next poll tries again */ });
}

document.addEventListener("DOMContentLoaded", function () {
  if (document.querySelector('[data-testid="overview"]')) {
    poll();
    window.setInterval(poll, 5000);
  }
});
