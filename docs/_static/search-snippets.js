/* labkit docs: a search result's snippet starts with the page's own text.
 *
 * Why: Sphinx's search builds each snippet from the page's [role="main"] element, and in sphinx-book-theme
 * that element also holds the article header (the theme switcher's "Light Dark", the download and
 * fullscreen buttons, labkit's language switcher), so every snippet began with the theme's words.
 * This drops the header before Sphinx reads the page; the rest is Sphinx's own Search.htmlToText.
 */
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || typeof Search.htmlToText !== "function") {
    return; // not the search page, or a Sphinx without this hook: its own snippets stand
  }
  const sphinxHtmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".bd-header-article, .labkit-languages").forEach((element) => element.remove());
    return sphinxHtmlToText(page.documentElement.outerHTML, anchor);
  };
});
