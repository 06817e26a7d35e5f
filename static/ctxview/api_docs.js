// Starts Swagger UI on the API reference page (templates/ctxview/api_docs.html), from our static files.
(() => {
  const root = document.getElementById("swagger-ui");
  SwaggerUIBundle({
    url: root.dataset.specUrl,
    domNode: root,
    deepLinking: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    displayRequestDuration: true,
    validatorUrl: null,  // the default sends the document to swagger.io's validator
    requestInterceptor: (request) => {
      // A session's write needs Django's CSRF token; a Bearer key or token goes without it.
      if (!["GET", "HEAD", "OPTIONS"].includes((request.method || "GET").toUpperCase())) {
        request.headers["X-CSRFToken"] = root.dataset.csrfToken;
      }
      return request;
    },
  });
})();
