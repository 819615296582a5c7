"""The Go language: detection, the test command, offline requirements, and what the patch review calls tests."""

from pathlib import Path

from tasks.grading.patch_policy import is_test_path
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
    assert detect_language(tmp_path).name == "python"  # a root that marks Python is Python
    (tmp_path / "setup.py").unlink()
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
    assert (
        why == "requirements not available offline: golang.org/x/sys v0.20.0 (Debian package golang-golang-x-sys-dev)"
    )
    (gocode / "golang.org/x/sys").mkdir(parents=True)
    assert unbuildable(tmp_path, gocode) == ""
    assert "no go.mod" in unbuildable(tmp_path / "gocode", gocode)
    script = vendor_script(GO_MOD, str(gocode))
    assert "exit 3" in script and "# golang.org/x/sys v0.20.0" in script


def test_go_tests_and_workspaces_are_tests_or_runner_configuration():
    assert is_test_path("pkg/stats/stats_test.go") and is_test_path("pkg/testdata/input.txt")
    assert not is_test_path("pkg/stats/stats.go") and not is_test_path("pkg/testing.go")
    assert is_test_path("go.work")


def test_a_module_with_requirements_builds_offline_from_a_gocode_tree(docker_backend):
    """vendor_script puts the requirements found under a gocode tree (laid out as Debian's
    /usr/share/gocode/src) into vendor/, and the test command then builds and tests offline with the real
    go command; a requirement the tree lacks stops the script with the Debian package named."""
    from sandboxes import SandboxSpec
    from sandboxes.images import build_base_image

    files = {
        "/gocode/example.org/greet/go.mod": "module example.org/greet\n\ngo 1.22\n",
        "/gocode/example.org/greet/greet.go": 'package greet\n\nfunc Hello(n string) string { return "hello " + n }\n',
        "/testbed/go.mod": "module example.com/app\n\ngo 1.22\n\nrequire example.org/greet v1.2.0\n",
        "/testbed/app.go": 'package app\n\nimport "example.org/greet"\n\nfunc Greet() string { return greet.Hello("go") }\n',
        "/testbed/app_test.go": 'package app\n\nimport "testing"\n\nfunc TestGreet(t *testing.T) {\n'
        '\tif Greet() != "hello go" {\n\t\tt.Fatal(Greet())\n\t}\n}\n',
    }
    spec = SandboxSpec(image=build_base_image(GO.base_recipe()), workdir="/testbed")
    with docker_backend.create(spec) as sb:
        for path, text in files.items():
            sb.write_file(path, text)
        sb.write_file("/tmp/vendor.sh", vendor_script(files["/testbed/go.mod"], "/gocode"))
        assert sb.exec("cd /testbed && bash /tmp/vendor.sh", timeout=60).exit_code == 0
        run = sb.exec(f"cd /testbed && {GO.test_command()}", timeout=300)
        assert run.exit_code == 0 and "--- PASS: TestGreet" in run.output, run.output
        sb.write_file("/tmp/missing.sh", vendor_script(GO_MOD, "/gocode"))
        missing = sb.exec("cd /testbed && bash /tmp/missing.sh", timeout=60)
        assert missing.exit_code == 3 and "golang-github-google-go-cmp-dev" in missing.output, missing.output


def test_a_base_that_cannot_be_built_names_apts_error_first():
    """A go.mod of many requirements makes a long package list; apt's error, not that list, leads the reason."""
    import shutil
    import subprocess

    from tasks.languages import apt_errors
    from tasks.mining.mine import reason_key
    from tests.conftest import require

    require(shutil.which("apt-get") is not None, "apt-get is not installed here")
    run = subprocess.run(
        ["apt-get", "-s", "install", "golang-go", "golang-no-such-module-dev"], capture_output=True, text=True
    )
    output = f"building the image harness-base:x failed:\n{run.stdout}{run.stderr}"
    assert apt_errors(output) == "Debian has no package golang-no-such-module-dev"
    assert reason_key(f"environment (newest): {apt_errors(output)} (the base with ...)") == (
        "environment: Debian has no package golang-no-such-module-dev (the base with ...)"
    )
    assert apt_errors("debootstrap failed (exit 1):\nno space left") == "debootstrap failed (exit 1):\nno space left"
