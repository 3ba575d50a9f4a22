// Flamegraph zoom: a click on a frame widens it to the full width; "reset" zooms out.
(function () {
  "use strict";
  var svg = document.getElementById("flame-svg");
  if (!svg) { return; }
  var width = Number(svg.getAttribute("data-width"));
  var frames = svg.querySelectorAll("g.f");
  function fit(name, px) {
    var max = Math.floor(px / 7);
    if (max < 3) { return ""; }
    return name.length <= max ? name : name.slice(0, max - 1) + "\u2026";
  }
  function zoom(x0, w0) {
    for (var i = 0; i < frames.length; i++) {
      var g = frames[i];
      var x = (Number(g.getAttribute("data-x")) - x0) / w0;
      var w = Number(g.getAttribute("data-w")) / w0;
      var left = Math.max(x, 0), right = Math.min(x + w, 1);
      if (right - left <= 1e-9) { g.style.display = "none"; continue; }
      g.style.display = "";
      var rect = g.querySelector("rect"), text = g.querySelector("text");
      rect.setAttribute("x", (left * width).toFixed(2));
      rect.setAttribute("width", ((right - left) * width).toFixed(2));
      text.setAttribute("x", (left * width + 3).toFixed(2));
      text.textContent = fit(g.getAttribute("data-n"), (right - left) * width - 6);
    }
  }
  svg.addEventListener("click", function (e) {
    var g = e.target.closest ? e.target.closest("g.f") : null;
    if (g) { zoom(Number(g.getAttribute("data-x")), Number(g.getAttribute("data-w"))); }
  });
  var reset = document.getElementById("flame-reset");
  if (reset) { reset.addEventListener("click", function () { zoom(0, 1); }); }
})();
