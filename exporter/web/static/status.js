// Progressive enhancement only: the page works without this file. Choices are not
// submitted on change (a keyboard user moving through a select would reload the page at
// every step); the Filter button or Enter submits.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // "/" jumps to the text filter, as on many sites; not while typing in a field.
  var text = document.getElementById("filter-text");
  if (!text) {
    return;
  }
  document.addEventListener("keydown", function (event) {
    var typing = /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault();
      text.focus();
      text.select();
    }
  });
});
