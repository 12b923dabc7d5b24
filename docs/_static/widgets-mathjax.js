/* The widget manager (@jupyter-widgets/html-manager) typesets a widget's math with MathJax 2's
   MathJax.Hub.Queue; this site loads MathJax 3, whose call is typesetPromise. Map the one onto
   the other on pages that load MathJax, so a widget's label is typeset instead of throwing. */
if (window.MathJax && window.MathJax.startup && !window.MathJax.Hub) {
  window.MathJax.Hub = {
    Queue: (job) => window.MathJax.startup.promise.then(() => window.MathJax.typesetPromise([job[2]])),
  };
}
