// Cadre console — the template editor's pickers: add a skill row, move a hook up or down,
// dim a tool row that is not allowed. The form posts without it (one empty skill row, hooks
// in their shown order).
(function () {
  "use strict";

  var form = document.getElementById("version-form");
  if (!form) return;

  // A new skill row from the formset's empty form (__prefix__ → the next index; its labels'
  // __number__, in whichever language they are written → the row's number).
  var add = document.getElementById("add-skill");
  var empty = document.getElementById("skill-empty");
  var total = form.querySelector("input[name=skill-TOTAL_FORMS]");
  if (add && empty && total) {
    add.addEventListener("click", function () {
      var index = parseInt(total.value, 10);
      var html = empty.innerHTML.replace(/__prefix__/g, String(index))
        .replace(/__number__/g, String(index + 1));
      var body = document.querySelector("#skill-rows tbody");
      body.insertAdjacentHTML("beforeend", html);
      total.value = String(index + 1);
      var select = body.lastElementChild.querySelector("select");
      if (select) select.focus();
    });
  }

  // Hooks run in the order their rows are posted: moving a row moves the hook.
  function refreshButtons(list) {
    var rows = list.querySelectorAll("li");
    rows.forEach(function (row, position) {
      row.querySelector("[data-move=up]").disabled = position === 0;
      row.querySelector("[data-move=down]").disabled = position === rows.length - 1;
    });
  }
  form.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-move]");
    if (!button) return;
    var row = button.closest("li");
    var list = row.parentElement;
    if (button.getAttribute("data-move") === "up" && row.previousElementSibling) {
      list.insertBefore(row, row.previousElementSibling);
    } else if (button.getAttribute("data-move") === "down" && row.nextElementSibling) {
      list.insertBefore(row.nextElementSibling, row);
    }
    refreshButtons(list);
    button.focus();
  });

  // A tool that is not allowed: its risk and confirmation do not apply.
  form.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("#tool-rows input[type=checkbox]")) return;
    box.closest("tr").classList.toggle("off", !box.checked);
  });
})();
