/* Draws the plotly figures of a page: every element with data-figure="<id>" names the
 * <script type="application/json" id="<id>"> (Django's json_script) that holds its figure.
 * Runs on load and after every htmx swap; plotly.min.js (our own static copy) is loaded on first use.
 * A point whose customdata is a local url, or a heatmap row with a link, opens that url through htmx. */
(function () {
  "use strict";
  var plotlyUrl = document.currentScript && document.currentScript.dataset.plotly;
  var loading = null;

  function loadPlotly() {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var tag = document.createElement("script");
        tag.src = plotlyUrl;
        tag.async = true;
        tag.onload = function () { resolve(window.Plotly); };
        tag.onerror = function () { loading = null; reject(new Error("plotly.min.js could not be loaded")); };
        document.head.appendChild(tag);
      });
    }
    return loading;
  }

  function isLocal(url) {
    return typeof url === "string" && url.charAt(0) === "/" && url.charAt(1) !== "/";
  }

  // Navigate like a boosted link: fetch into #page and push the url (no full reload).
  function navigate(url) {
    if (!isLocal(url)) return;
    var page = document.getElementById("page");
    if (!page || !window.htmx) { window.location.assign(url); return; }
    var link = document.createElement("a");
    link.href = url;
    link.className = "plot-nav";
    page.appendChild(link);  // inside the boosted region; the swap replaces it
    window.htmx.process(link);
    link.click();
  }

  // links: {x: [...]} or {x0, dx}, with prefix + ids[i] + suffix (see ctxview/shapes/plot.py).
  function linkAt(links, x) {
    var index = links.x ? links.x.indexOf(x) : Math.round((x - links.x0) / links.dx);
    if (index < 0 || index >= links.ids.length) return null;
    return links.prefix + links.ids[index] + links.suffix;
  }

  function clicked(figure, event) {
    var points = (event && event.points) || [];
    for (var i = 0; i < points.length; i++) {
      if (isLocal(points[i].customdata)) { navigate(points[i].customdata); return; }
    }
    var byX = figure.links && figure.links.ids;
    if (byX && points.length) {
      var url = linkAt(figure.links, points[0].x);
      if (isLocal(url)) { navigate(url); return; }
    }
    var rows = figure.links && figure.links.rows;
    if (rows && points.length) {
      var index = points[0].pointNumber;
      var row = Array.isArray(index) ? index[0] : null;
      if (row !== null && isLocal(rows[row])) navigate(rows[row]);
    }
  }

  // A heatmap's hover text comes as indexes into a table of labels, and its gaps as 0: expand both.
  function expand(figure) {
    if (!figure.cells) return;
    var trace = figure.data[0];
    var labels = figure.cells.labels;
    trace.text = figure.cells.index.map(function (row) {
      return row.map(function (i) { return i < 0 ? "" : labels[i]; });
    });
    trace.z = trace.z.map(function (row) {
      return row.map(function (v) { return v === 0 ? null : v; });
    });
  }

  // The figures are built light (ctxview/panels/plot.py); under a dark system setting their ink and paper
  // take the page's colours (app.css custom properties).
  var DARK = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  var INK = "#1d2330", PAPER = "#ffffff";

  function themed(value, colours) {
    if (typeof value === "string") {
      var lower = value.toLowerCase();
      return lower === INK ? colours.ink : lower === PAPER ? colours.paper : value;
    }
    if (Array.isArray(value)) return value.map(function (v) { return themed(v, colours); });
    if (value && typeof value === "object") {
      Object.keys(value).forEach(function (key) { value[key] = themed(value[key], colours); });
    }
    return value;
  }

  function theme(figure) {
    if (!DARK) return;
    var css = getComputedStyle(document.documentElement);
    var colours = {
      ink: css.getPropertyValue("--fg").trim() || "#e3e7ef",
      paper: css.getPropertyValue("--card").trim() || "#171c26",
    };
    var grid = css.getPropertyValue("--line").trim() || "#2c3444";
    themed(figure.data, colours);
    themed(figure.layout, colours);
    ["xaxis", "yaxis", "yaxis2"].forEach(function (name) {
      var axis = figure.layout[name];
      if (axis) { axis.gridcolor = grid; axis.zerolinecolor = grid; axis.linecolor = grid; }
    });
  }

  function draw(el) {
    if (el.dataset.drawn) return;
    var source = document.getElementById(el.dataset.figure);
    if (!source) return;
    var figure;
    try {
      figure = JSON.parse(source.textContent);
    } catch (error) {
      el.textContent = "This chart's data could not be read. Reload the page.";
      return;
    }
    expand(figure);
    theme(figure);
    el.dataset.drawn = "drawing";
    el.classList.add("plot-loading");
    loadPlotly().then(function (Plotly) {
      if (!document.body.contains(el)) return null;
      return Plotly.newPlot(el, figure.data, figure.layout, figure.config).then(function () {
        el.classList.remove("plot-loading");
        el.dataset.drawn = "ready";
        el.on("plotly_click", function (event) { clicked(figure, event); });
      });
    }).catch(function (error) {
      el.classList.remove("plot-loading");
      el.dataset.drawn = "failed";
      el.textContent = "The chart could not be drawn (" + error.message + "). Reload the page; the tables below show the same figures.";
    });
  }

  function drawAll() {
    document.querySelectorAll("[data-figure]").forEach(draw);
  }

  // Figures are re-drawn from their JSON after a history restore: keep the saved snapshot small.
  function purgeAll() {
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      if (window.Plotly && el.dataset.drawn === "ready") window.Plotly.purge(el);
      el.textContent = "";
      delete el.dataset.drawn;
    });
  }

  document.addEventListener("DOMContentLoaded", drawAll);
  document.addEventListener("htmx:afterSettle", drawAll);
  document.addEventListener("htmx:historyRestore", drawAll);
  document.addEventListener("htmx:beforeHistorySave", purgeAll);
  document.addEventListener("htmx:sendError", drawAll);
  window.ctxviewPlots = { drawAll: drawAll, navigate: navigate };
})();
