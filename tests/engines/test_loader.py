import logging
import sys
import textwrap
import uuid

import pytest
from lionctx.engines import (
    ContextCompressor,
    ContextEngine,
    PluginContext,
    PluginLoadError,
    configured_engine_name,
    engine_for_agent,
    list_context_engines,
    load_config,
    load_engine,
    register_context_engine,
    registered_context_engine,
)

LOG = "lionctx.engines.loader"

ENGINE_BODY = '''
from lionctx.engines import ContextEngine


class {cls}(ContextEngine):
    """{doc}"""

    def __init__(self, context_length=1000, **settings):
        self.context_length = context_length
        self.settings = settings

    @property
    def name(self):
        return {name!r}

    def update_from_response(self, usage):
        pass

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None):
        return messages
'''


def engine_source(name, cls="PluginEngine", doc="A test engine."):
    return ENGINE_BODY.format(cls=cls, name=name, doc=doc)


def make_plugin(root, dirname, files, meta=None):
    """Write ``root/plugins/context_engine/<dirname>/`` with ``files``."""
    directory = root / "plugins" / "context_engine" / dirname
    directory.mkdir(parents=True)
    for rel, text in files.items():
        (directory / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    if meta is not None:
        (directory / "plugin.yaml").write_text(textwrap.dedent(meta), encoding="utf-8")
    return directory


def warnings_from(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == LOG and r.levelno == logging.WARNING]


# -- configuration ------------------------------------------------------------------


def test_default_engine_is_the_compressor():
    assert configured_engine_name(None) == "compressor"
    assert configured_engine_name({}) == "compressor"
    assert configured_engine_name({"context": {}}) == "compressor"
    assert configured_engine_name({"context": {"engine": " lcm "}}) == "lcm"
    engine = engine_for_agent()
    assert isinstance(engine, ContextCompressor)


def test_yaml_and_toml_files(tmp_path):
    yml = tmp_path / "config.yaml"
    yml.write_text("context:\n  engine: lcm\n")
    toml = tmp_path / "config.toml"
    toml.write_text('[context]\nengine = "topic"\n')
    assert load_config(yml) == {"context": {"engine": "lcm"}}
    assert configured_engine_name(str(yml)) == "lcm"
    assert configured_engine_name(toml) == "topic"


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("config.json", "{}", "must end in .yaml, .yml or .toml"),
        ("config.yaml", "- a\n- b\n", "mapping at the top, got list"),
        ("config.yaml", "context: [unclosed\n", "not valid YAML"),
        ("config.toml", "context = [", "not valid TOML"),
    ],
)
def test_bad_config_files_are_named(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        load_config(path)
    assert name in str(info.value)


def test_bad_engine_value_is_named():
    with pytest.raises(ValueError, match="42"):
        configured_engine_name({"context": {"engine": 42}})
    with pytest.raises(ValueError, match="context"):
        configured_engine_name({"context": "lcm"})
    with pytest.raises(TypeError, match="12"):
        configured_engine_name(12)


def test_yaml_config_without_pyyaml_says_what_to_install(tmp_path, monkeypatch):
    path = tmp_path / "c.yml"
    path.write_text("context: {engine: x}\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if pyyaml were not installed
    with pytest.raises(ImportError, match="pyyaml"):
        load_config(path)


# -- directory plugins --------------------------------------------------------------


def test_directory_plugin_with_a_relative_import(tmp_path):
    make_plugin(
        tmp_path,
        "rel",
        {
            "helpers.py": "def shout(text):\n    return text.upper()\n",
            "__init__.py": "from .helpers import shout\n" + engine_source("rel"),
        },
        meta="name: rel\ndescription: Relative imports work\nversion: 1.2.3\n",
    )
    engine = engine_for_agent({"context": {"engine": "rel"}}, search_paths=[tmp_path])
    assert isinstance(engine, ContextEngine)
    assert type(engine).__name__ == "PluginEngine" and engine.name == "rel"
    module = sys.modules[type(engine).__module__]
    assert module.shout("x") == "X"
    assert sys.modules[module.__name__ + ".helpers"].shout is module.shout


def test_search_path_may_point_at_the_context_engine_folder(tmp_path):
    directory = make_plugin(tmp_path, "direct", {"__init__.py": engine_source("direct")})
    engine = engine_for_agent({"context": {"engine": "direct"}}, search_paths=[directory.parent])
    assert engine.name == "direct"


def test_plugin_paths_from_the_config_file(tmp_path):
    make_plugin(tmp_path / "extra", "cfgpath", {"__init__.py": engine_source("cfgpath")})
    config = tmp_path / "config.yaml"
    config.write_text(f"context:\n  engine: cfgpath\n  plugin_paths: ['{tmp_path / 'extra'}']\n")
    assert engine_for_agent(config, search_paths=[]).name == "cfgpath"
    # relative to the file, not to the working directory
    relative = tmp_path / "relative.toml"
    relative.write_text('[context]\nengine = "cfgpath"\nplugin_paths = ["extra"]\n')
    assert engine_for_agent(relative, search_paths=[]).name == "cfgpath"


def test_hidden_private_and_initless_folders_are_skipped(tmp_path, caplog):
    for dirname in ("_private", ".hidden"):
        make_plugin(tmp_path, dirname, {"__init__.py": engine_source(dirname)})
    make_plugin(tmp_path, "noinit", {"engine.py": engine_source("noinit")}, meta="name: noinit\n")
    names = [info.name for info in list_context_engines([tmp_path])]
    assert names == ["compressor"]
    caplog.set_level(logging.WARNING, logger=LOG)
    for name in ("_private", ".hidden", "noinit"):
        engine = engine_for_agent({"context": {"engine": name}}, search_paths=[tmp_path])
        assert isinstance(engine, ContextCompressor)
    assert all("not installed" in m for m in warnings_from(caplog))


def test_register_ctx_is_called_before_the_class_scan(tmp_path):
    make_plugin(tmp_path, "reg", {"__init__.py": engine_source("reg") + textwrap.dedent('''
        def register(ctx):
            ctx.register_context_engine(PluginEngine(context_length=200000, db="memory"))
    ''')})
    engine = engine_for_agent({"context": {"engine": "reg"}}, search_paths=[tmp_path])
    assert engine.context_length == 200000 and engine.settings == {"db": "memory"}


def test_register_ctx_refuses_a_second_engine_and_non_engines(tmp_path, caplog):
    make_plugin(tmp_path, "greedy", {"__init__.py": engine_source("greedy") + textwrap.dedent('''
        ACCEPTED = []

        def register(ctx):
            ACCEPTED.append(ctx.register_context_engine("not an engine"))
            ACCEPTED.append(ctx.register_context_engine(PluginEngine(context_length=1)))
            ACCEPTED.append(ctx.register_context_engine(PluginEngine(context_length=2)))
    ''')})
    caplog.set_level(logging.WARNING, logger=LOG)
    engine = engine_for_agent({"context": {"engine": "greedy"}}, search_paths=[tmp_path])
    assert engine.context_length == 1
    assert sys.modules[type(engine).__module__].ACCEPTED == [False, True, False]
    messages = warnings_from(caplog)
    assert any("not a ContextEngine" in m for m in messages)
    assert any("second engine" in m for m in messages)


def test_first_subclass_defined_in_the_plugin_is_built(tmp_path):
    make_plugin(tmp_path, "scan", {"__init__.py": textwrap.dedent('''
        from lionctx.engines import ContextCompressor, ContextEngine  # imported: not candidates
        from .impl import First
        from .impl import Second
    '''), "impl.py": engine_source("scan", cls="First") + engine_source("scan2", cls="Second")})
    engine = engine_for_agent({"context": {"engine": "scan"}}, search_paths=[tmp_path])
    assert type(engine).__name__ == "First"


def test_plugin_without_an_engine_fails_to_load(tmp_path, caplog):
    make_plugin(tmp_path, "empty", {"__init__.py": "VALUE = 1\n"})
    with pytest.raises(PluginLoadError, match="no engine"):
        load_engine("empty", search_paths=[tmp_path])
    caplog.set_level(logging.WARNING, logger=LOG)
    assert isinstance(engine_for_agent({"context": {"engine": "empty"}}, search_paths=[tmp_path]),
                      ContextCompressor)
    assert "'empty' failed to load" in warnings_from(caplog)[0]


def test_plugin_that_raises_on_import_falls_back_and_leaves_no_module(tmp_path, caplog):
    make_plugin(tmp_path, "broken", {"__init__.py": "from .missing import nothing\n"})
    before = set(sys.modules)
    caplog.set_level(logging.WARNING, logger=LOG)
    engine = engine_for_agent({"context": {"engine": "broken"}}, search_paths=[tmp_path])
    assert isinstance(engine, ContextCompressor)
    assert "'broken' failed to load" in warnings_from(caplog)[0]
    assert not [m for m in set(sys.modules) - before if "broken" in m]


def test_plugin_is_never_activated_unless_named(tmp_path):
    marker = tmp_path / "imported.txt"
    make_plugin(tmp_path, "sneaky", {"__init__.py": (
        f"open({str(marker)!r}, 'w').write('ran')\n" + engine_source("sneaky")
    )})
    assert isinstance(engine_for_agent(None, search_paths=[tmp_path]), ContextCompressor)
    assert isinstance(engine_for_agent({"context": {"engine": "compressor"}},
                                       search_paths=[tmp_path]),
                      ContextCompressor)
    assert not marker.exists()
    infos = list_context_engines([tmp_path], load=False)
    assert [i.name for i in infos] == ["compressor", "sneaky"] and not marker.exists()


def test_each_agent_gets_its_own_clone_of_one_shared_instance(tmp_path):
    make_plugin(tmp_path, "shared",
                {"__init__.py": "LOADS = []\nLOADS.append(1)\n" + engine_source("shared")})
    config = {"context": {"engine": "shared"}}
    a = engine_for_agent(config, search_paths=[tmp_path])
    b = engine_for_agent(config, search_paths=[tmp_path])
    shared = load_engine("shared", search_paths=[tmp_path])
    assert len({id(a), id(b), id(shared)}) == 3
    assert type(a) is type(b) is type(shared)
    assert sys.modules[type(a).__module__].LOADS == [1]  # imported once


@pytest.mark.parametrize(
    "clone_body",
    ["raise RuntimeError('no db')", "return 'not an engine'"],
)
def test_cloning_failure_falls_back_to_the_compressor(tmp_path, caplog, clone_body):
    name = f"fragile{abs(hash(clone_body))}"
    make_plugin(tmp_path, name, {"__init__.py": engine_source(name) + textwrap.dedent(f'''
        def _clone(self):
            {clone_body}

        PluginEngine.clone_for_agent = _clone
    ''')})
    caplog.set_level(logging.WARNING, logger=LOG)
    engine = engine_for_agent({"context": {"engine": name}}, search_paths=[tmp_path])
    assert isinstance(engine, ContextCompressor)
    (message,) = warnings_from(caplog)
    assert repr(name) in message and "built-in compressor" in message


def test_unknown_engine_falls_back_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=LOG)
    engine = engine_for_agent({"context": {"engine": "lcm"}}, search_paths=[tmp_path])
    assert isinstance(engine, ContextCompressor)
    assert "'lcm'" in warnings_from(caplog)[0]
    with pytest.raises(LookupError, match="'lcm'"):
        load_engine("lcm", search_paths=[tmp_path])


def test_compressor_gets_the_model_and_settings():
    class Model:
        def complete_sync(self, messages):
            return None

    model = Model()
    engine = engine_for_agent(
        {"context": {"compressor": {"context_length": 32000, "threshold_percent": 0.75}}},
        model=model
    )
    assert engine.model is model and engine.threshold_tokens == 24000
    with pytest.raises(ValueError, match="colour"):
        engine_for_agent({"context": {"compressor": {"colour": "red"}}})


# -- programmatic registration ------------------------------------------------------


def plain_engine_class():
    namespace = {}
    exec(engine_source("progr", cls="Progr"), namespace)
    return namespace["Progr"]


def test_register_context_engine_accepts_one_engine(caplog):
    Progr = plain_engine_class()
    first = Progr(context_length=5)
    caplog.set_level(logging.WARNING, logger=LOG)
    assert register_context_engine(first) is True
    assert register_context_engine(Progr()) is False
    assert register_context_engine(object()) is False
    assert registered_context_engine() is first
    messages = warnings_from(caplog)
    assert "already registered" in messages[0] and "not a ContextEngine" in messages[1]


def test_registered_engine_is_used_only_when_named():
    Progr = plain_engine_class()
    shared = Progr(context_length=5)
    register_context_engine(shared)
    assert isinstance(engine_for_agent(), ContextCompressor)
    a = engine_for_agent({"context": {"engine": "progr"}}, search_paths=[])
    b = engine_for_agent({"context": {"engine": "progr"}}, search_paths=[])
    assert isinstance(a, Progr) and a is not shared and a is not b and a.context_length == 5


def test_plugin_context_is_the_same_contract():
    ctx = PluginContext("test")
    assert not ctx.register_context_engine(42)
    assert ctx.engine is None


# -- entry points -------------------------------------------------------------------


def make_distribution(site, dist, module, entry, *, version="0.3.0", body=None):
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(body or engine_source(entry, cls="EPEngine"))
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nSummary: Engine from {dist}\n"
    )
    (info / "entry_points.txt").write_text(
        f"[lionctx.context_engines]\n{entry} = {module}:EPEngine\n")
    return site


def test_entry_point_plugin(tmp_path, monkeypatch):
    suffix = uuid.uuid4().hex[:8]
    module = f"ep_engine_{suffix}"
    site = make_distribution(tmp_path / "site", f"ep_engine_{suffix}", module, f"ep-{suffix}")
    monkeypatch.syspath_prepend(str(site))
    try:
        engine = engine_for_agent({"context": {"engine": f"ep-{suffix}"}}, search_paths=[])
        assert type(engine).__name__ == "EPEngine" and engine.name == f"ep-{suffix}"
        (info,) = [i for i in list_context_engines([]) if i.name == f"ep-{suffix}"]
        assert info.available and info.version == "0.3.0"
        assert info.description == f"Engine from ep_engine_{suffix}"
        assert info.source == f"entry point {module}:EPEngine"
    finally:
        sys.modules.pop(module, None)


def test_entry_point_is_not_loaded_unless_named(tmp_path, monkeypatch):
    suffix = uuid.uuid4().hex[:8]
    module = f"ep_lazy_{suffix}"
    marker = tmp_path / "loaded.txt"
    body = (f"open({str(marker)!r}, 'w').write('x')\n"
            + engine_source(f"lazy-{suffix}", cls="EPEngine"))
    site = make_distribution(tmp_path / "site", module, module, f"lazy-{suffix}", body=body)
    monkeypatch.syspath_prepend(str(site))
    assert isinstance(engine_for_agent(search_paths=[]), ContextCompressor)
    assert [i.name for i in list_context_engines([], load=False)][-1] == f"lazy-{suffix}"
    assert not marker.exists()
    sys.modules.pop(module, None)


# -- listing ------------------------------------------------------------------------


def test_listing_reports_every_engine_with_its_availability(tmp_path):
    make_plugin(tmp_path, "good", {"__init__.py": engine_source("good")},
                meta="name: good\ndescription: Works fine\nversion: '2.0'\n")
    make_plugin(tmp_path, "bad", {"__init__.py": "raise ImportError('needs lcm-native')\n"},
                meta="description: Needs a native library\n")
    other = tmp_path / "second"
    make_plugin(other, "good", {"__init__.py": engine_source("good")}, meta="name: good\n")
    infos = list_context_engines([tmp_path, other])
    by_source = {(i.name, i.source): i for i in infos}
    assert infos[0].name == "compressor" and infos[0].source == "builtin" and infos[0].available
    good = by_source[("good", str(tmp_path / "plugins" / "context_engine" / "good"))]
    assert (good.description, good.version, good.available, good.error) == (
        "Works fine", "2.0", True, None)
    bad = by_source[("bad", str(tmp_path / "plugins" / "context_engine" / "bad"))]
    assert not bad.available and "needs lcm-native" in bad.error
    assert bad.description == "Needs a native library"
    shadowed = by_source[("good", str(other / "plugins" / "context_engine" / "good"))]
    assert not shadowed.available and shadowed.error.startswith("shadowed by")


def test_listing_includes_a_registered_engine():
    Progr = plain_engine_class()
    register_context_engine(Progr())
    infos = list_context_engines([])
    assert [(i.name, i.source, i.description) for i in infos][1] == (
        "progr", "registered", "A test engine.")


def test_search_paths_must_be_a_list():
    with pytest.raises(TypeError, match="single path"):
        list_context_engines("plugins")
