import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINED = {
    "trained_run",
    "windowed",
    "root",
    "long_root",
    "world",
    "tiny_root",
    "broken_checkpoint",
}  # fixtures that train


def pytest_collection_modifyitems(items):
    """A test on a trained fixture belongs to the second tier (``-m integration``), like those marked so."""
    for item in items:
        if TRAINED & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def empty_cwd(tmp_path, monkeypatch):
    """An empty working directory: default paths (``runs/…``) resolve where nothing is, whatever
    the clone holds (``reproduce --quick`` writes ``runs/quick/`` in it)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def script(monkeypatch):
    """``script(NAME)``: ``lab/NAME.py`` as a module, with ``lab/`` on the path for the
    scripts it imports, as when it runs from there."""
    folder = os.path.join(ROOT, "lab")
    monkeypatch.syspath_prepend(folder)

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, os.path.join(folder, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(autouse=True)
def wandb_stays_local(tmp_path_factory, monkeypatch):
    """No test talks to a wandb server or writes under the home directory. Tests that are not
    about tracking run wandb in its no-op ``disabled`` mode; test_track.py switches to offline."""
    home = tmp_path_factory.getbasetemp() / "wandb-home"
    for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.setenv(name, str(home / name.lower()))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
