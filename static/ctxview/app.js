/* Page behaviour that needs a script: keyboard shortcuts for links that declare one
 * (data-hotkey="ArrowLeft", "Shift+ArrowRight", ...), and a visible message when the server
 * cannot be reached. Error pages (400/404/500) are swapped in by htmx itself (see base.html). */
(function () {
  "use strict";
  // The page's CSS shows the no-JavaScript notes and hides "Loading…" only while this class is left.
  document.documentElement.classList.remove("no-js");

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    // "/" goes to the jump box (a run key, #call, turn N or an item id) from any page.
    var jumpBox = document.getElementById("jump-q");
    if (event.key === "/" && jumpBox) {
      event.preventDefault();
      jumpBox.focus();
      jumpBox.select();
      return;
    }
    var key = (event.shiftKey ? "Shift+" : "") + event.key;
    var links = document.querySelectorAll("#page [data-hotkey]");
    for (var i = 0; i < links.length; i++) {
      if (links[i].dataset.hotkey === key) {
        event.preventDefault();
        links[i].click();
        return;
      }
    }
  });

  function status(text) {
    var el = document.getElementById("net-status");
    if (el) el.textContent = text;
  }

  document.addEventListener("htmx:sendError", function (event) {
    status("The server could not be reached. Check that ctxview is running, then retry.");
    var target = event.detail && event.detail.target;
    if (target && target.id !== "page" && target.classList.contains("panel-body")) {
      target.textContent = "Could not load this panel: the server did not answer. Reload the page to retry.";
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail && event.detail.successful) status("");
  });

  // The runs filters: a choice in a list or a date filters at once; a text field on Enter or Filter.
  // (Filtering on every change sent two requests for one click on Filter, the field's change on blur
  // and the submit: the second replaced the table under a click on a link in it, which went nowhere.)
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.form && field.form.matches("form.filters") && field.matches("select, input[type=datetime-local]")) {
      field.form.requestSubmit();
    }
  });
})();
