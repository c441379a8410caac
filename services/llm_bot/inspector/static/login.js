// A login URL ending in #key=<key> (llm-bot dev prints one) fills the form and logs in,
// on load and when only the fragment changes (the URL pasted over an open login page).
// The fragment never leaves the browser: it is not sent to the server nor kept in history.
(function () {
  function logInFromFragment() {
    var match = /^#key=(.+)$/.exec(window.location.hash);
    if (!match) { return; }
    history.replaceState(null, "", window.location.pathname);
    var field = document.getElementById("key");
    if (!field) { return; }
    field.value = decodeURIComponent(match[1]);
    field.form.submit();
  }
  window.addEventListener("hashchange", logInFromFragment);
  logInFromFragment();
})();
