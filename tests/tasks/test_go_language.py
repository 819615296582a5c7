"""The Go language: detection, the test command, offline requirements, and what the patch review calls tests."""

from pathlib import Path

from tasks.grading.patch_policy import is_test_path, review_patch
from tasks.languages import detect_language, language_named, language_of
from tasks.languages.go import GO, debian_package, requirements, unbuildable, vendor_script

GO_MOD = """module example.com/app

go 1.22

require github.com/google/go-cmp v0.6.0

require (
\tgolang.org/x/sys v0.20.0 // indirect
\tgopkg.in/yaml.v3 v3.0.1
)
"""


def test_a_go_mod_makes_a_go_project(tmp_path: Path):
    (tmp_path / "setup.py").write_text("")
    assert detect_language(tmp_path).name == "python"
    (tmp_path / "go.mod").write_text("module example.com/app\n\ngo 1.22\n")
    assert detect_language(tmp_path) is GO
    assert language_named("golang") is GO and GO.title == "Go"
    assert language_of({"log_parser": "parse_log_gotest"}) is GO
    assert "golang-go" in GO.base_recipe()["packages"]


def test_the_test_command_runs_the_module_or_the_packages_of_the_named_files():
    whole = GO.test_command()
    assert whole.endswith("go test -v -count=1 ./...")
    assert "GOPROXY=off" in whole and "GOTOOLCHAIN=local" in whole and "GOFLAGS=-mod=mod" in whole
    named = GO.test_command(None, ["stats/stats_test.go", "money/money_test.go", "stats/more_test.go", "root_test.go"])
    assert named.endswith("go test -v -count=1 . ./money ./stats")


def test_requirements_and_their_debian_packages(tmp_path: Path):
    assert requirements(GO_MOD) == [
        ("github.com/google/go-cmp", "v0.6.0", False),
        ("golang.org/x/sys", "v0.20.0", True),
        ("gopkg.in/yaml.v3", "v3.0.1", False),
    ]
    assert [debian_package(m) for m, _, _ in requirements(GO_MOD)] == [
        "golang-github-google-go-cmp-dev",
        "golang-golang-x-sys-dev",
        "golang-gopkg-yaml.v3-dev",
    ]
    (tmp_path / "go.mod").write_text(GO_MOD)
    gocode = tmp_path / "gocode"
    (gocode / "github.com/google/go-cmp").mkdir(parents=True)
    (gocode / "gopkg.in/yaml.v3").mkdir(parents=True)
    why = unbuildable(tmp_path, gocode)
    assert why == "requirements not available offline: golang.org/x/sys v0.20.0 (Debian package golang-golang-x-sys-dev)"
    (gocode / "golang.org/x/sys").mkdir(parents=True)
    assert unbuildable(tmp_path, gocode) == ""
    assert "no go.mod" in unbuildable(tmp_path / "gocode", gocode)
    script = vendor_script(GO_MOD, str(gocode))
    assert "exit 3" in script and "# golang.org/x/sys v0.20.0" in script


def test_go_tests_and_workspaces_are_tests_or_runner_configuration():
    assert is_test_path("pkg/stats/stats_test.go") and is_test_path("pkg/testdata/input.txt")
    assert not is_test_path("pkg/stats/stats.go") and not is_test_path("pkg/testing.go")
    assert is_test_path("go.work")
