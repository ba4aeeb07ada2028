// Starts Swagger UI on /docs with msgapi's own document. Nothing is loaded
// from elsewhere: the bundle is served by this server, the validator badge
// (which would call validator.swagger.io) is off, and "Try it out" calls
// this origin (the document's server is "/"). Authorize with a workspace
// API key (apiKey) or the admin token (adminToken); neither is stored.
(function () {
  "use strict";
  function scrollToHash() {
    // Problem types point at /docs#error-<code>: the Errors section below
    // the reference. Swagger UI renders after the browser has tried to
    // scroll there, so scroll once it is done.
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (id.indexOf("error-") === 0) {
      var el = document.getElementById(id);
      if (el) {
        el.scrollIntoView();
      }
    }
  }
  // The first-message block's commands name this server.
  var origins = document.querySelectorAll(".docs-origin");
  for (var i = 0; i < origins.length; i++) {
    origins[i].textContent = window.location.origin;
  }
  window.ui = SwaggerUIBundle({
    url: "/openapi.yaml",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    persistAuthorization: false,
    displayRequestDuration: true,
    showExtensions: false,
    defaultModelsExpandDepth: 0,
    docExpansion: "list",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    onComplete: scrollToHash,
  });
})();
