import os
import sys
from pathlib import Path

import pytest
import torch

# the repository root on sys.path: ``import fairseq_luong`` and ``tests.helpers``
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYTHONWARNINGS", "ignore")
if "OMP_NUM_THREADS" not in os.environ:  # test.sh sets 1: two pytest-xdist processes, one thread each
    torch.set_num_threads(min(2, os.cpu_count() or 1))

# The files that take minutes run first, so that pytest-xdist (--dist loadfile) spreads the
# short ones around them instead of starting a long one last.
LONG_FIRST = ["test_learning.py", "test_in_form.py", "test_recipes.py", "test_perspe_e2e.py",
              "test_benchmarks.py", "test_gpu_paths.py", "test_gpu_session.py"]


# The full tier (`bash test.sh --all`, CI): what trains for minutes or runs a recipe's bash
# end to end: the learning tests, the perSPE recipe, and every test that needs a fixture which
# runs a recipe (the WMT'14 rehearsal, the Multi30k recipe, the in-form study, the GPU
# stand-ins through the WMT'14 recipe), and fairseq's own models trained with and without the plugin
# (test_coexistence.py, 12 processes), and training on several processes (test_distributed.py's
# torchrun and SIGKILL runs, beside their one-process reference: 5 process starts, about 35 s of
# the 2 cores). `bash test.sh` runs the rest (-m "not full").
FULL_FILES = {"test_learning.py", "test_perspe_e2e.py", "test_coexistence.py", "test_iwslt_recipe.py"}
FULL_FIXTURES = {("test_recipes.py", "rehearsal"), ("test_recipes.py", "stanford"), ("test_recipes.py", "multi30k"),
                 ("test_in_form.py", "work"), ("test_gpu_paths.py", "release"),
                 ("test_generation_options.py", "family"), ("test_generation_options.py", "data_bin"),
                 ("test_distributed.py", "one_process")}


def pytest_configure(config):
    config.addinivalue_line("markers", "full: the full tier only (bash test.sh --all): minutes of training or a "
                                       "recipe run end to end")


# The suite writes only under pytest's tmp_path: a command run in the checkout with a default
# folder (fairseq-train makes --save-dir "checkpoints" even with --no-save) fails the session.
_REPO = Path(__file__).resolve().parents[1]


def _checkout_entries():
    return set(os.listdir(_REPO))


def pytest_sessionstart(session):
    session.config._entries_before = _checkout_entries()


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # pytest-xdist: the main process checks, once all workers are done
        return
    made = sorted(_checkout_entries() - session.config._entries_before)
    if made:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        line = f"the tests left {', '.join(made)} in the checkout ({_REPO}): write under tmp_path"
        if reporter is not None:
            reporter.write_line(f"\nERROR: {line}", red=True)
        else:
            print(f"ERROR: {line}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        name = item.path.name
        return LONG_FIRST.index(name) if name in LONG_FIRST else len(LONG_FIRST)

    for item in items:
        name = item.path.name
        if name in FULL_FILES or any((name, f) in FULL_FIXTURES for f in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.full)
    items.sort(key=rank)  # stable: the order inside a file is kept


@pytest.fixture(autouse=True)
def threads_kept():
    """A test that runs a script in this process may set torch's threads (scripts/eval/ take two):
    the next tests of the process get the count back. Two pytest-xdist workers on two cores at two
    threads each made the suite ten times slower (OpenMP threads waiting on one another)."""
    n = torch.get_num_threads()
    yield
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


@pytest.fixture
def one_thread():
    """Tiny models: one thread beats two contending ones."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def data_bin(tmp_path_factory):
    """The synthetic number corpus (400/40/12 pairs), raw/ and binarized bin/ (joined dictionary)."""
    from tests.helpers import REPO, cli, run

    root = tmp_path_factory.mktemp("numbers")
    run([sys.executable, str(REPO / "scripts" / "data" / "make_number_corpus.py"), "--out", str(root / "raw"),
         "--train", "400", "--valid", "40", "--test", "12", "--seed", "3"])
    cli("preprocess", ["-s", "en", "-t", "de", "--trainpref", str(root / "raw/train"),
                       "--validpref", str(root / "raw/valid"), "--testpref", str(root / "raw/test"),
                       "--destdir", str(root / "bin"), "--joined-dictionary", "--workers", "1"])
    return root


@pytest.fixture(scope="session")
def diagonal_model(tmp_path_factory):
    """Raw word-level data and a crafted model whose target word t attends to source word t
    (tests/helpers.py: build_diagonal_model)."""
    from tests.helpers import build_diagonal_model

    return build_diagonal_model(tmp_path_factory.mktemp("diagonal"))
