"""An env.toml's `type` resolves through the `agentenv_local.env_types` plugin group: through the CLI, an
unknown one is refused with the registered types listed and nothing is stored."""

from __future__ import annotations

import shutil
from pathlib import Path

from agentenv_local.plugins import PluginRegistry

ECHO = Path(__file__).resolve().parents[3] / "examples" / "envs" / "echo" / "server.py"


def test_an_unknown_env_type_is_refused_with_the_registered_ones_and_nothing_is_written(project):
    registered = ", ".join(sorted(PluginRegistry().available("env_types")))
    folder = project.root / "echo"
    folder.mkdir()
    shutil.copy(ECHO, folder / "server.py")
    project.write("echo/env.toml", 'type = "mcpserver"\nmodule = "server.py:Echo"\n')
    done = project.cli("env", "put", "echo", "--id", "my-echo", code=1)
    assert ("envs/echo/env.toml: type 'mcpserver' is not an env type this version deploys; "
            f"use one of {registered}") in done.stderr
    assert project.stored()["documents"] == set()

    bundle = project.copy_hello("withenvs")
    shutil.copytree(folder, bundle / "envs" / "echo")
    done = project.cli("run", "./withenvs", code=1)
    assert "type 'mcpserver' is not an env type this version deploys" in done.stderr
    assert project.stored()["documents"] == set()

    project.write("echo/env.toml", 'type = "mcp_server"\nmodule = "server.py:Echo"\n')
    assert "Created mcp_server env my-echo v1." in project.cli("env", "put", "echo", "--id", "my-echo").stdout
