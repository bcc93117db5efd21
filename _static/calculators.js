// The HTML book's calculators (book_lib.calculators): turning a knob runs book_lib's own Python in
// the reader's browser under Pyodide, which the book serves itself from _static/pyodide/ together
// with book_lib's pure modules (book_lib.zip), loaded on the first touch. No formula lives here: the
// page sends the knobs' chosen offers to calculators.in_page and shows the table it returns.
(() => {
  const here = document.currentScript ? document.currentScript.src : location.href;
  const root = new URL("pyodide/", here);
  let python = null;

  function script(src) {
    return new Promise((resolve, reject) => {
      const tag = document.createElement("script");
      tag.src = src;
      tag.onload = resolve;
      tag.onerror = () => reject(new Error(`could not load ${src}`));
      document.head.appendChild(tag);
    });
  }

  async function start() {
    await script(new URL("pyodide.js", root).href);
    const py = await loadPyodide({ indexURL: root.href });
    const zip = await fetch(new URL("book_lib.zip", root));
    py.unpackArchive(await zip.arrayBuffer(), "zip", { extractDir: "/home/pyodide/book" });
    py.runPython("import sys; sys.path.insert(0, '/home/pyodide/book'); from book_lib import calculators");
    return py;
  }

  async function compute(form) {
    const result = form.querySelector(".calculator-result");
    const began = performance.now();
    form.dataset.state = "loading";
    result.textContent = python
      ? "Computing…"
      : "Loading Python (Pyodide) from this book, once: a few seconds…";
    try {
      python = python || start();
      const py = await python;
      const chosen = {};
      for (const select of form.querySelectorAll("select")) chosen[select.name] = Number(select.value);
      const request = JSON.stringify({
        name: form.dataset.calculator,
        defaults: JSON.parse(form.dataset.defaults),
        chosen,
      });
      py.globals.set("request", request);
      result.innerHTML = py.runPython("calculators.in_page(request)");
      form.dataset.state = "ready";
    } catch (error) {
      result.textContent = `The calculator could not run here: ${error.message}`;
      form.dataset.state = "failed";
    }
    form.dataset.milliseconds = String(Math.round(performance.now() - began));
  }

  for (const form of document.querySelectorAll("form.calculator-form")) {
    form.hidden = false;
    form.addEventListener("submit", (event) => event.preventDefault());
    form.addEventListener("change", () => compute(form));
  }
})();
