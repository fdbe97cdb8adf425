"""The docs (docs/: the MyST user guide and the autodoc API reference) build without a single
warning, cover every public package, every registered method and every CLI command; the
README's method list is the registry's; and, in headless Chromium, the index and the methods
pages fit the window and every internal link resolves."""

from __future__ import annotations

import html.parser
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import click
import pytest

import k2dec
from k2dec.methods import list_methods

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Subpackages that are not decoding API: test factories.
NOT_API = {"testing"}
#: The pages the browser check renders (the methods table, a generated family page, the
#: CLI reference with its long option lines).
RENDERED = ("index.html", "guide/methods.html", "guide/methods-transducer.html", "guide/cli.html")
#: Window widths (CSS pixels) the rendered pages must fit: a laptop and a narrow window.
WIDTHS = (1280, 800)
README_MAX_LINES = 250


def _docs_ext():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import k2dec_docs
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    return k2dec_docs


def test_every_public_package_has_its_page():
    """A new subpackage needs an ``.. automodule::`` in docs/api/*.rst."""
    documented = "\n".join(p.read_text() for p in (DOCS / "api").glob("*.rst"))
    packages = [m.name for m in pkgutil.iter_modules(k2dec.__path__) if m.ispkg]
    missing = [p for p in packages if p not in NOT_API
               and f".. automodule:: k2dec.{p}\n" not in documented]
    assert not missing, (f"add '.. automodule:: k2dec.<name>' to a page of {DOCS / 'api'} "
                         f"for {missing}")


def test_readme_method_list_is_the_registrys():
    """The README's generated block lists every registered method, as the generator would
    write it now (``python docs/_ext/k2dec_docs.py README.md`` rewrites it)."""
    ext = _docs_ext()
    readme = (ROOT / "README.md").read_text()
    assert ext.rewrite_readme(readme) == readme, (
        "README.md's method list is out of date: run python docs/_ext/k2dec_docs.py README.md")
    block = readme[readme.index(ext.README_BEGIN):readme.index(ext.README_END)]
    for m in list_methods():
        assert f"| `{m.name}` |" in block


def test_readme_generator_notices_a_stale_list():
    ext = _docs_ext()
    readme = (ROOT / "README.md").read_text()
    stale = re.sub(r"\| `1best` \|[^\n]*\n", "", readme)
    assert stale != readme and ext.rewrite_readme(stale) == readme
    with pytest.raises(ValueError, match="methods:begin"):
        ext.rewrite_readme("# no block\n")


def test_every_method_has_one_home_page():
    ext = _docs_ext()
    homes = {m.name: ext.home(m) for m in list_methods()}
    assert set(homes.values()) <= set(ext.PAGES)
    for page, doc in ext.PAGES.items():
        text = (DOCS / f"{doc}.md").read_text()
        assert f"```{{k2dec-methods}} {page}\n" in text, f"{doc}.md lacks its method directive"


def test_readme_is_short_and_has_no_run_diaries():
    """A newcomer reads the README in minutes; dated figures live in RESULTS.md and
    BENCHMARKS.md, which the README links to."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    texts = [ROOT / "README.md", *sorted((DOCS / "guide").glob("*.md")), DOCS / "index.md"]
    dated = [f"{p.relative_to(ROOT)}:{i}" for p in texts
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"(?<![\w-])20\d\d-\d\d-\d\d(?![\w-])", line)]
    assert not dated, f"dated run notes belong in RESULTS.md / BENCHMARKS.md: {dated}"


def test_readme_figures_link_to_where_they_were_measured():
    readme = (ROOT / "README.md").read_text()
    for para in readme.split("\n\n"):
        if re.search(r"\d+(\.\d+)? ?(s|min|minutes|GB)\b", para) and "```" not in para:
            assert "RESULTS.md" in para or "BENCHMARKS.md" in para, para


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_markdown_links_resolve():
    """Relative links of the README and the guide name files of the checkout, and their
    ``#anchors`` headings of those files (as GitHub renders them)."""
    bad = []
    for page in [ROOT / "README.md", *sorted((DOCS / "guide").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                bad.append(f"{page.name}: {target} (no file)")
            elif anchor and file.suffix == ".md" and anchor not in {
                    _slug(h) for h in re.findall(r"^#+ (.+)$", file.read_text(), re.M)}:
                bad.append(f"{page.name}: {target} (no heading)")
    assert not bad, bad


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory) -> Path:
    """The docs as ``make docs`` builds them (warnings as errors)."""
    pytest.importorskip("sphinx", reason="Sphinx is in the docs extra (pip install -e .[docs])")
    pytest.importorskip("myst_parser", reason="myst-parser is in the docs extra")
    pytest.importorskip("sphinx_click", reason="sphinx-click is in the docs extra")
    out = tmp_path_factory.mktemp("docs") / "html"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                          "html", str(DOCS), str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def _build_tiny(tmp_path: Path, notes: str) -> subprocess.CompletedProcess:
    """A two-page Sphinx project with the AED method page, its directive holding ``notes``."""
    pytest.importorskip("myst_parser", reason="myst-parser is in the docs extra")
    src = tmp_path / "src"
    (src / "guide").mkdir(parents=True)
    (src / "conf.py").write_text(f"import sys\nsys.path[:0] = [{str(DOCS / '_ext')!r}, "
                                 f"{str(ROOT)!r}]\nextensions = ['myst_parser', 'k2dec_docs']\n")
    (src / "index.md").write_text("# x\n\n```{toctree}\nguide/methods-aed\n```\n")
    (src / "guide" / "methods-aed.md").write_text(
        f"# AED\n\n```{{k2dec-methods}} aed\n{notes}```\n")
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(src),
                           str(tmp_path / "html")], capture_output=True, text=True, timeout=300)


def test_method_notes_must_name_the_pages_methods(tmp_path):
    """A "when to choose it" note for a method the page does not hold fails the build; a
    good one appears in the method's section."""
    bad = _build_tiny(tmp_path / "bad", "no-such-method: never\n")
    assert bad.returncode != 0
    assert "'no-such-method' is not a registered method of the 'aed' page" in bad.stderr
    good = _build_tiny(tmp_path / "good", "attention-beam-search: a note\n  that goes on\n")
    assert good.returncode == 0, good.stderr
    page = (tmp_path / "good" / "html" / "guide" / "methods-aed.html").read_text()
    assert 'id="method-attention-beam-search"' in page and "a note that goes on" in page


def test_api_reference_builds_without_warnings(built_docs):
    page = (built_docs / "api" / "recognizer.html").read_text()
    for name in ("k2dec.recognizer.Recognizer.from_files", "k2dec.recognizer.RecognizerStream",
                 "k2dec.recognizer.RecognitionResult"):
        assert f'id="{name}"' in page
    searches = (built_docs / "api" / "searches.html").read_text()
    assert 'id="k2dec.lattice.get_lattice"' in searches
    assert 'id="k2dec.transducer.fast_beam_search"' in searches


def test_every_method_is_in_the_table_and_on_its_page(built_docs):
    ext = _docs_ext()
    table = (built_docs / "guide" / "methods.html").read_text()
    for m in list_methods():
        page = (built_docs / f"{ext.PAGES[ext.home(m)]}.html").read_text()
        assert f'id="method-{m.name}"' in page, m.name
        assert f"#method-{m.name}" in table, m.name
        for key in m.default_config().__dataclass_fields__:
            assert key in page, (m.name, key)


def _commands(group: click.Group, prefix: str) -> list[str]:
    out = []
    for name, cmd in group.commands.items():
        out.append(f"{prefix} {name}")
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{prefix} {name}")
    return out


def test_every_cli_command_is_in_the_reference(built_docs):
    from k2dec.cli import main

    page = (built_docs / "guide" / "cli.html").read_text()
    for command in _commands(main, "k2dec"):
        anchor = command.replace(" ", "-")
        assert f'id="{anchor}"' in page, f"{command} has no section (#{anchor}) in cli.html"


def test_footer_has_no_empty_copyright(built_docs):
    page = (built_docs / "index.html").read_text()
    footer = page[page.index('<div class="footer">'):]
    assert "&#169;." not in footer and "©." not in footer, footer[:300]
    assert "&#169;2026, the k2dec authors." in footer and "|" not in footer, footer[:300]


# --- in a browser ---------------------------------------------------------------------------

#: Appended to a copy of a page: measures, after layout, what sticks out of the window, and
#: writes it into the DOM that ``--dump-dom`` prints.
MEASURE = """<script>
window.addEventListener('load', () => {
  const vw = document.documentElement.clientWidth, out = [];
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : '');
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    let clipped = false;
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') { clipped = true; break; }
    }
    if (!clipped && r.right > vw + 1) out.push(name(e) + ' right=' + Math.round(r.right));
    const s = getComputedStyle(e);
    if ((e.tagName === 'PRE' || e.tagName === 'TABLE') && e.scrollWidth > e.clientWidth + 1
        && !['auto', 'scroll'].includes(s.overflowX)) out.push(name(e) + ' cut off');
  }
  const doc = document.documentElement;
  if (doc.scrollWidth > vw + 1) out.push('page scrolls sideways: ' + doc.scrollWidth + ' > ' + vw);
  const pre = document.createElement('pre');
  pre.id = 'k2dec-overflow';
  pre.textContent = JSON.stringify(out.slice(0, 20));
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path is not None:
            return path
    pytest.skip("headless Chromium is not installed (Debian package: chromium)")


def _render(chromium: str, page: Path, width: int, tmp: Path) -> str:
    copy = page.with_name(f".k2dec-measure-{width}-{page.name}")
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    try:
        run = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={tmp / 'profile'}", f"--window-size={width},900",
             "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()],
            capture_output=True, text=True, timeout=120)
    finally:
        copy.unlink()
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", RENDERED)
def test_rendered_page_fits_the_window(built_docs, tmp_path, name, width):
    chromium = _chromium()
    dom = _render(chromium, built_docs / name, width, tmp_path)
    found = re.search(r'<pre id="k2dec-overflow">(.*?)</pre>', dom, re.S)
    assert found is not None, f"the measuring script did not run in {name}"
    overflow = json.loads(html.unescape(found.group(1)))
    assert not overflow, f"{name} at {width}px: {overflow}"


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
        if tag in ("link", "script", "img") and (a.get("href") or a.get("src")):
            self.hrefs.append(a.get("href") or a.get("src"))


def _parsed(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text())
    return p


def broken_links(root: Path, page: Path) -> list[str]:
    """Internal links of ``page`` (in the DOM Chromium loaded) that name no built file or no
    element id of it."""
    bad = []
    for href in _parsed(page).hrefs:
        url = urllib.parse.urlsplit(href)
        if url.scheme or url.netloc or href.startswith("mailto:"):
            continue
        target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
        if not target.is_file() or root.resolve() not in target.parents:
            bad.append(f"{href} (no file)")
        elif url.fragment and target.suffix == ".html" and url.fragment not in _parsed(target).ids:
            bad.append(f"{href} (no #{url.fragment})")
    return bad


@pytest.mark.parametrize("name", RENDERED)
def test_rendered_page_has_no_broken_link(built_docs, tmp_path, name):
    chromium = _chromium()
    dom = tmp_path / Path(name).name
    dom.write_text(_render(chromium, built_docs / name, WIDTHS[0], tmp_path))
    # links are relative to the page's folder: judge the dumped DOM from there
    placed = built_docs / Path(name).parent / f".k2dec-dom-{Path(name).name}"
    shutil.copy(dom, placed)
    try:
        bad = broken_links(built_docs, placed)
    finally:
        placed.unlink()
    assert not bad, f"{name}: {bad}"


def test_broken_link_check_finds_a_broken_link(built_docs, tmp_path):
    page = built_docs / "guide" / ".k2dec-broken.html"
    page.write_text('<a href="methods.html#method-no-such">x</a><a href="nowhere.html">y</a>'
                    '<a href="methods-lattice.html#method-1best">ok</a>'
                    '<a href="https://k2-fsa.org">z</a>')
    try:
        assert broken_links(built_docs, page) == [
            "methods.html#method-no-such (no #method-no-such)", "nowhere.html (no file)"]
    finally:
        page.unlink()
