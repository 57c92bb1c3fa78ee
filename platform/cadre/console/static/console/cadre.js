// Cadre console — small first-party behaviours. Everything works without it; it only adds
// confirmation prompts, copy buttons, auto-submitting filters and closing open menus.
(function () {
  "use strict";

  // <form data-confirm="Really?">: ask before submitting.
  document.addEventListener("submit", function (event) {
    var message = event.target.getAttribute && event.target.getAttribute("data-confirm");
    if (message && !window.confirm(message)) {
      event.preventDefault();
    }
  }, true);

  // <button data-copy="#element-id">: copy the element's value or text.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    var text = source.value !== undefined ? source.value : source.textContent;
    var done = function () {
      var label = button.textContent;
      button.textContent = gettext("Copied");
      setTimeout(function () { button.textContent = label; }, 1600);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
    } else {
      // Plain-HTTP installs have no Clipboard API: fall back to selecting the text.
      if (source.select) source.select();
      try { document.execCommand("copy"); done(); } catch (e) { /* the text stays selected */ }
    }
  });

  // <select data-autosubmit>: submit its form on change (a filter without a button).
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.hasAttribute && field.hasAttribute("data-autosubmit") && field.form) {
      if (field.form.requestSubmit) field.form.requestSubmit(); else field.form.submit();
    }
  });

  // <input data-select-on-click>: select the whole value (a secret or a link to copy).
  document.addEventListener("click", function (event) {
    var field = event.target;
    if (field.hasAttribute && field.hasAttribute("data-select-on-click") && field.select) {
      field.select();
    }
  });

  // The sidebar scrolls on its own: keep the current page's entry in sight (the last entries
  // are below the fold on a laptop screen).
  document.addEventListener("DOMContentLoaded", function () {
    var current = document.querySelector(".sidebar .nav-link.active");
    if (current && current.scrollIntoView) current.scrollIntoView({ block: "nearest" });
  });

  // Close an open <details class="menu"> when clicking elsewhere or pressing Escape.
  document.addEventListener("click", function (event) {
    document.querySelectorAll("details.menu[open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.removeAttribute("open");
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      document.querySelectorAll("details.menu[open]").forEach(function (menu) {
        menu.removeAttribute("open");
      });
    }
  });
})();
