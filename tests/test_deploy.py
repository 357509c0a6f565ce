"""The cluster recipes in ``deploy/``: parsed and checked for what their tools need,
and, where this machine can, executed.

No Docker engine, Kubernetes API server, Helm or SLURM is available to the tests,
so the processes the recipes start are started directly: the scheduler and
worker command lines and the worker environment of ``docker-compose.yml`` run as
real processes on 127.0.0.1 (``cluster_procs.py``); the SLURM batch script that
dask-jobqueue generates from ``jobqueue.yaml`` is rendered and its worker line
run; the TLS set-up of ``deploy/README.md`` is run with a throwaway CA.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import yaml
from cluster_procs import (
    COMPOSE_SCHEDULER,
    DEPLOY,
    REPO,
    ProcessCluster,
    compose_service,
    interpolate,
    load_compose,
)
from dask.utils import parse_bytes
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import dasketch
from dasketch.datasets import write_synthetic

cloudpickle.register_pickle_by_value(sys.modules[__name__])

BLAS_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _load(relative):
    with open(DEPLOY / relative) as fh:
        return yaml.safe_load(fh)


def _option(args, name):
    """Value of ``--name value`` or ``--name=value`` in an argument list (last wins)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif isinstance(arg, str) and arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def _sketch_and_check(client, n_rows, n_features, sketch_size, seed):
    """Sketch decaying-spectrum data on ``client``; assert the RFD certificate."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features)) * 0.8 ** np.arange(n_features)
    sketch = dasketch.sketch(X, sketch_size, client=client, block_rows=n_rows // 6)
    error = np.linalg.norm(X.T @ X - sketch.covariance(), 2)
    assert error <= sketch.error_bound * (1 + 1e-9)
    assert sketch.error_bound < 0.5 * np.linalg.norm(X, 2) ** 2


def _env_list(env):
    return {item["name"]: str(item["value"]) for item in env or []}


# ------------------------------------------------------------------ compose
def test_compose_services_commands_and_limits():
    compose = load_compose()
    services = compose["services"]
    assert {"scheduler", "worker", "jupyter"} <= set(services)
    scheduler, _ = compose_service("scheduler")
    worker, worker_env = compose_service("worker")
    # Current command names; the old dask-scheduler / dask-worker scripts are gone.
    assert scheduler[:2] == ["dask", "scheduler"]
    assert worker[:2] == ["dask", "worker"] and COMPOSE_SCHEDULER in worker
    assert _option(scheduler, "--port") == "8786"
    assert _option(scheduler, "--dashboard-address").endswith(":8787")
    # Memory limit of the worker process, below the container's hard limit so that
    # the nanny (not the kernel OOM killer) handles memory pressure.
    limit = parse_bytes(_option(worker, "--memory-limit"))
    container = parse_bytes(interpolate(
        services["worker"]["deploy"]["resources"]["limits"]["memory"], {}))
    assert 0 < limit < container
    # BLAS threads set deliberately, identically for every BLAS, and the CPU budget
    # of a worker container is not oversubscribed.
    blas = {worker_env[name] for name in BLAS_VARIABLES}
    assert len(blas) == 1
    threads = int(_option(worker, "--nthreads"))
    cpus = float(interpolate(services["worker"]["deploy"]["resources"]["limits"]["cpus"], {}))
    assert threads * int(blas.pop()) <= cpus
    # Interpolation works as compose does: the variables resize the workers.
    resized, resized_env = compose_service("worker", {"DASK_WORKER_MEMORY_LIMIT": "1GiB",
                                                      "DASK_BLAS_THREADS": "4"})
    assert _option(resized, "--memory-limit") == "1GiB"
    assert {resized_env[name] for name in BLAS_VARIABLES} == {"4"}
    # Every container runs the image built from deploy/Dockerfile.
    for name in ("scheduler", "worker", "jupyter"):
        build = services[name]["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == \
            (DEPLOY / "Dockerfile").resolve()
    # Workers wait for a healthy scheduler; the health check hits the dashboard.
    assert services["worker"]["depends_on"]["scheduler"]["condition"] == "service_healthy"
    assert "/health" in " ".join(services["scheduler"]["healthcheck"]["test"])
    # Workers and the notebook see the data at the same path.
    mounts = [{v.split(":")[-1] for v in services[name]["volumes"]}
              for name in ("worker", "jupyter")]
    assert "/data" in mounts[0] & mounts[1]
    env = services["jupyter"]["environment"]
    assert env["DASK_SCHEDULER_ADDRESS"] == COMPOSE_SCHEDULER
    # Workers come back after a scheduler restart (they exit with status 0).
    assert services["worker"]["restart"] in ("always", "unless-stopped")


def _published(service):
    """``(host_ip, host_port, container_port)`` of each published port, interpolated
    with no variables set (the defaults)."""
    out = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            out.append((entry.get("host_ip", ""), str(entry.get("published")),
                        str(entry["target"])))
            continue
        parts = interpolate(str(entry), {}).split(":")
        if len(parts) == 3:
            out.append(tuple(parts))
        elif len(parts) == 2:
            out.append(("", parts[0], parts[1]))
        else:
            out.append(("", "", parts[0]))
    return out


def test_compose_does_not_publish_the_scheduler():
    services = load_compose()["services"]
    published = {name: _published(service) for name, service in services.items()}
    for name, ports in published.items():
        for host_ip, _, container_port in ports:
            assert container_port != "8786", f"{name} publishes the scheduler port"
            assert host_ip == "127.0.0.1", f"{name} publishes {container_port} beyond loopback"
    assert "8786" in [str(p) for p in services["scheduler"]["expose"]]
    assert ("127.0.0.1", "8787", "8787") in published["scheduler"]  # the dashboard


def test_dockerfile_installs_the_repository():
    text = (DEPLOY / "Dockerfile").read_text()
    instructions = [line.split(None, 1) for line in text.splitlines()
                    if line and not line.startswith("#") and not line.startswith(" ")]
    keywords = [parts[0] for parts in instructions]
    assert keywords[keywords.index("FROM") - 1] == "ARG" and "python:" in text
    copies = [parts[1].split()[:-1] for parts in instructions if parts[0] == "COPY"]
    sources = [src for srcs in copies for src in srcs]
    for src in sources:  # every COPY source exists relative to the build context
        assert (REPO / src).exists(), src
    assert {"pyproject.toml", "dasketch", "deploy/bin/dask-scheduler"} <= set(sources)
    assert re.search(r"RUN pip install -c constraints.txt \.\s", text)
    for name in BLAS_VARIABLES:
        assert re.search(rf"{name}=1\b", text)
    assert re.search(r"^USER \w+", text, re.M)  # not root
    # The ignore file keeps what COPY needs.
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for src in ("pyproject.toml", "dasketch/", "deploy/bin/", "deploy/constraints.txt"):
        assert f"!{src}" in ignore


def _constraints():
    pins = {}
    for line in (DEPLOY / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_images_and_packages_are_pinned():
    """Image tags are the package version (no ``latest``), the base image names a
    Python patch release, and every package the Dockerfile installs is pinned to
    the versions tested here."""
    from importlib import metadata

    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    for path in DEPLOY.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert not re.search(r"latest", path.read_text()), path
    assert load_compose()["x-dasketch-image"]["image"].endswith(f":-dasketch:{version}}}")
    values = _load("helm/values.yaml")
    assert {values[part]["image"]["tag"] for part in ("scheduler", "worker", "jupyter")} == {
        version}
    pods = _load("kubernetes/daskcluster.yaml")["spec"]
    assert {c["image"] for part in ("scheduler", "worker")
            for c in pods[part]["spec"]["containers"]} == {f"dasketch:{version}"}
    text = (DEPLOY / "Dockerfile").read_text()
    assert f'org.opencontainers.image.version="{version}"' in text
    assert re.search(r"^ARG PYTHON_VERSION=3\.\d+\.\d+$", text, re.M)

    pins = _constraints()
    (line,) = re.findall(r"^RUN pip install (.*)$", text, re.M)
    args = shlex.split(line)
    assert args[:2] == ["-c", "constraints.txt"]
    packages = [a for a in args[2:] if a != "." and not a.startswith("$")]
    assert packages and all(Requirement(p).name in pins for p in packages), packages
    # dasketch's runtime requirements, pinned to versions that satisfy them; dask and
    # distributed at the versions of this environment (clients must match).
    for text in metadata.requires("dasketch"):
        req = Requirement(text)
        if req.marker is None:
            assert req.specifier.contains(pins[canonicalize_name(req.name)]), req
    for name in ("dask", "distributed", "numpy", "zarr"):
        assert pins[name] == metadata.version(name)


@pytest.mark.parametrize("name", ["dask-scheduler", "dask-worker"])
def test_compatibility_names_run_current_commands(name):
    """The Helm chart calls ``dask-scheduler`` / ``dask-worker``; the image's
    wrappers must start the current commands. The image has ``dask`` on PATH;
    here it is the one installed beside this interpreter (no activated venv)."""
    scripts = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=scripts + os.pathsep + os.environ.get("PATH", ""))
    out = subprocess.run([str(DEPLOY / "bin" / name), "--help"], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert f"Usage: dask {name.split('-')[1]}" in out.stdout


# ------------------------------------------------------------------ helm / kubernetes
def test_helm_values_for_the_dask_chart():
    values = _load("helm/values.yaml")
    for part in ("scheduler", "worker", "jupyter"):
        image = values[part]["image"]
        assert image["repository"] and str(image["tag"])
    assert values["scheduler"]["serviceType"] == "ClusterIP"
    assert values["jupyter"]["serviceType"] == "ClusterIP"
    assert not values["webUI"]["ingress"]["enabled"]
    assert values["scheduler"]["readinessProbe"]["httpGet"]["path"] == "/health"
    worker = values["worker"]
    # The chart execs this name; the image must provide it.
    assert (DEPLOY / "bin" / worker["image"]["dask_worker"]).exists()
    limits = worker["resources"]["limits"]
    memory_limit = parse_bytes(_option(worker["extraArgs"], "--memory-limit"))
    assert 0 < memory_limit < parse_bytes(limits["memory"])
    blas = {v for k, v in _env_list(worker["env"]).items() if k in BLAS_VARIABLES}
    assert len(blas) == 1 and len(_env_list(worker["env"])) >= 3
    assert worker["threads_per_worker"] * int(blas.pop()) <= float(limits["cpu"])
    assert worker["replicas"] >= 1
    # Jupyter: no default password (the chart's default hash is the password "dask");
    # JupyterLab loads the chart's config file and reads the hash where jupyter_server
    # looks, so --set jupyter.password=HASH works, and without it the token does.
    jupyter = values["jupyter"]
    assert jupyter["password"] in ("", None) and "dask" not in jupyter["passwordHint"]
    assert "--config=/usr/local/etc/jupyter/jupyter_notebook_config.py" in jupyter["args"]
    assert re.search(r"^c\.PasswordIdentityProvider\.hashed_password = c\.NotebookApp\.password$",
                     jupyter["extraConfig"], re.M)


# Labels of the dask/dask chart's pods (templates/dask-*-deployment.yaml), for the
# release name of deploy/README.md; and the label of the user's client pods.
CHART_LABELS = {"app": "dask", "release": "dasketch"}
CLIENT_LABELS = {"dasketch/client": "dasketch"}


def _peer_role(peer):
    """``component`` of a NetworkPolicy peer of the release, ``"client"``, or an
    assertion error for anything else (other namespaces, IP blocks, any pod)."""
    assert set(peer) == {"podSelector"}, peer
    labels = peer["podSelector"].get("matchLabels") or {}
    assert set(peer["podSelector"]) == {"matchLabels"}, peer
    if labels == CLIENT_LABELS:
        return "client"
    assert labels == dict(CHART_LABELS, component=labels.get("component")), labels
    return labels["component"]


def test_networkpolicy_admits_only_the_release_to_the_scheduler():
    with open(DEPLOY / "kubernetes" / "networkpolicy.yaml") as fh:
        docs = list(yaml.safe_load_all(fh))
    policies = {}
    for doc in docs:
        assert doc["apiVersion"] == "networking.k8s.io/v1" and doc["kind"] == "NetworkPolicy"
        selected = doc["spec"]["podSelector"]["matchLabels"]
        assert selected == dict(CHART_LABELS, component=selected.get("component"))
        assert "Ingress" in doc["spec"]["policyTypes"]
        admitted = {}
        for rule in doc["spec"].get("ingress") or []:
            assert rule.get("from"), rule  # a rule without peers admits everyone
            ports = [p["port"] for p in rule.get("ports") or [{"port": "any"}]]
            for peer in rule["from"]:
                for port in ports:
                    admitted.setdefault(port, set()).add(_peer_role(peer))
        policies[selected["component"]] = admitted
    assert set(policies) == {"scheduler", "worker", "jupyter"}
    values = _load("helm/values.yaml")
    assert values["scheduler"]["servicePort"] == 8786
    assert policies["scheduler"] == {8786: {"worker", "jupyter", "client"},
                                     8787: {"jupyter", "client"}}
    assert policies["worker"] == {"any": {"scheduler", "worker", "jupyter", "client"}}
    assert policies["jupyter"] == {}


def test_daskcluster_for_the_operator():
    doc = _load("kubernetes/daskcluster.yaml")
    assert doc["apiVersion"] == "kubernetes.dask.org/v1" and doc["kind"] == "DaskCluster"
    name = doc["metadata"]["name"]
    spec = doc["spec"]
    # Required by the operator's schema: scheduler.{spec, service}, worker.spec.
    scheduler_pod, service = spec["scheduler"]["spec"], spec["scheduler"]["service"]
    worker_pod = spec["worker"]["spec"]
    assert spec["worker"]["replicas"] >= 1
    (scheduler,) = scheduler_pod["containers"]
    (worker,) = worker_pod["containers"]
    assert scheduler["args"][:2] == ["dask", "scheduler"]
    assert worker["args"][:2] == ["dask", "worker"]
    assert "$(DASK_WORKER_NAME)" in worker["args"]
    # The service is internal and routes to the named container ports.
    assert service["type"] == "ClusterIP"
    assert service["selector"] == {"dask.org/cluster-name": name,
                                   "dask.org/component": "scheduler"}
    port_names = {p["name"] for p in scheduler["ports"]}
    assert {p["targetPort"] for p in service["ports"]} <= port_names
    assert {p["port"] for p in service["ports"]} == {8786, 8787}
    probe = scheduler["readinessProbe"]["httpGet"]
    assert probe["path"] == "/health" and probe["port"] in port_names
    memory_limit = parse_bytes(_option(worker["args"], "--memory-limit"))
    assert 0 < memory_limit < parse_bytes(worker["resources"]["limits"]["memory"])
    env = _env_list(worker["env"])
    threads = int(_option(worker["args"], "--nthreads"))
    assert threads * int(env["OMP_NUM_THREADS"]) <= float(worker["resources"]["limits"]["cpu"])
    assert {env[k] for k in BLAS_VARIABLES} == {env["OMP_NUM_THREADS"]}
    mounts = {m["name"] for m in worker["volumeMounts"]}
    assert mounts <= {v["name"] for v in worker_pod["volumes"]}


# ------------------------------------------------------------------ slurm
SLURM_CONFIG = DEPLOY / "slurm" / "jobqueue.yaml"


def _slurm_launcher():
    """``deploy/slurm/launch.py`` as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("dasketch_slurm_launch",
                                                  DEPLOY / "slurm" / "launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def slurm_launcher(tmp_path, monkeypatch):
    """The launcher module; Dask's configuration (which it merges jobqueue.yaml
    into) is restored afterwards, and dask-jobqueue's log directory goes to tmp."""
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed")
    pytest.importorskip("cryptography")
    import copy

    import dask

    saved = copy.deepcopy(dask.config.config)
    monkeypatch.chdir(tmp_path)
    try:
        yield _slurm_launcher()
    finally:
        dask.config.config.clear()
        dask.config.config.update(saved)


def _listening(processes):
    """``{(ip, port)}`` of the TCP sockets listening in ``processes`` (psutil)."""
    import psutil

    return {(c.laddr.ip, c.laddr.port) for proc in processes
            for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}


def _expand_in_batch_shell(line, env):
    """The arguments of a batch-script line after bash's expansions, in ``env``."""
    out = subprocess.run(["bash", "-c", "printf '%s\\n' " + line], capture_output=True,
                         text=True, timeout=30, env=env, check=True)
    return out.stdout.splitlines()


def test_slurm_launcher_needs_a_named_interface(slurm_launcher, capsys):
    """Without an interface the launcher refuses in one line saying how to name one,
    before it starts anything; an interface this node lacks is refused too."""
    assert _load("slurm/jobqueue.yaml")["jobqueue"]["slurm"]["interface"] is None
    for argv, expected in (([], "--interface NAME"), (["--interface", "nosuch0"], "nosuch0")):
        assert slurm_launcher.main(["--config", str(SLURM_CONFIG)] + argv) == 2
        err = capsys.readouterr().err.strip()
        assert expected in err and "lo" in err and len(err.splitlines()) == 1, err


@pytest.mark.timeout(180)
def test_slurm_recipe_serves_tls_on_its_interface_only(slurm_launcher, tmp_path):
    """The recipe's cluster, on interface lo: a tls:// scheduler and a dashboard that
    listen on 127.0.0.1 only; the batch script's worker line, run here, joins over
    TLS and a client with the launcher's credentials runs a certified sketch; a
    client in plain TCP or without a certificate is refused."""
    import dask
    import psutil
    from cluster_procs import _kill_group

    config = _load("slurm/jobqueue.yaml")["jobqueue"]["slurm"]
    assert config["cores"] % config["processes"] == 0
    this = psutil.Process()
    before = _listening([this])
    cluster = slurm_launcher.make_cluster(SLURM_CONFIG, interface="lo",
                                          tls_dir=tmp_path / "tls")
    worker = None
    try:
        address = cluster.scheduler_address
        assert re.fullmatch(r"tls://127\.0\.0\.1:\d+", address), address
        opened = _listening([this]) - before
        assert len(opened) >= 2 and {ip for ip, _ in opened} == {"127.0.0.1"}, opened
        assert cluster.dashboard_link.startswith("http://127.0.0.1:")

        script = cluster.job_script()
        assert f"#SBATCH --cpus-per-task={config['cores']}" in script
        assert "#SBATCH --mem=" in script and "#SBATCH -t " in script
        for name in BLAS_VARIABLES:
            assert f"export {name}=1" in script
        (line,) = [ln for ln in script.splitlines() if "dask_worker" in ln]
        # The batch shell runs the line; with TMPDIR unset --local-directory has a value.
        env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
        args = _expand_in_batch_shell(line, env)
        assert _option(args, "--local-directory") == "/tmp"
        assert _option(args, "--protocol") == "tls://" and _option(args, "--interface") == "lo"
        assert _option(args, "--dashboard-address").startswith("127.0.0.1:")
        for option in ("--tls-ca-file", "--tls-cert", "--tls-key"):
            path = Path(_option(args, option))
            assert path.parent == tmp_path / "tls" and path.stat().st_mode & 0o077 == 0
        assert (tmp_path / "tls").stat().st_mode & 0o077 == 0
        threads = int(_option(args, "--nthreads"))
        assert threads * int(_option(args, "--nworkers")) == config["cores"]
        per_process = parse_bytes(_option(args, "--memory-limit"))
        assert per_process * config["processes"] <= parse_bytes(config["memory"]) * 1.001

        # Run the worker line here: one process, small memory.
        args = [sys.executable] + args[1:]
        for option, value in (("--nworkers", "1"), ("--nthreads", "1"),
                              ("--memory-limit", "1GiB"), ("--local-directory", str(tmp_path))):
            args[args.index(option) + 1] = value
        worker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, start_new_session=True,
                                  env=dict(env, OMP_NUM_THREADS="1"))

        paths = slurm_launcher.write_client_credentials(cluster.security, tmp_path / "client")
        assert (tmp_path / "client").stat().st_mode & 0o077 == 0
        assert all(Path(p).stat().st_mode & 0o077 == 0 for p in paths.values())
        security = slurm_launcher.client_security(paths)
        with dasketch.get_client(address, security=security, timeout="20s",
                                 set_as_default=False) as client:
            client.wait_for_workers(1, timeout=60)
            workers = client.scheduler_info()["workers"]
            assert workers and all(a.startswith("tls://127.0.0.1:") for a in workers)
            _sketch_and_check(client, 3000, 12, 6, seed=0)
            # The worker and its nanny listen on loopback only, dashboards included.
            tree = [psutil.Process(worker.pid)] + psutil.Process(worker.pid).children(True)
            listening = _listening(tree)
            assert len(listening) >= 3 and {ip for ip, _ in listening} == {"127.0.0.1"}
        # The settings in client.env, as a shell that sources it passes them to Dask.
        exports = dict(ln[len("export "):].split("=", 1)
                       for ln in Path(paths["env"]).read_text().splitlines())
        settings = {name[len("DASK_"):].lower().replace("__", ".").replace("_", "-"):
                    yaml.safe_load(value) for name, value in exports.items()}
        assert settings["distributed.comm.require-encryption"] is True
        with dask.config.set(settings), \
                dasketch.get_client(address, timeout="20s", set_as_default=False) as client:
            assert client.submit(sum, [1, 2]).result() == 3
        # Plain TCP, or TLS without the client's certificate: refused in bounded time.
        for refused in (address.replace("tls://", "tcp://"), address):
            with pytest.raises((OSError, TypeError, ValueError)):
                with dasketch.get_client(refused, timeout="3s", set_as_default=False):
                    pass
    finally:
        if worker is not None:
            _kill_group(worker)
        cluster.close()


# ------------------------------------------------------------------ running it
@pytest.fixture(scope="module")
def compose_cluster(tmp_path_factory):
    """The compose cluster with its defaults: 2 workers x 2 threads, 3.5 GiB limit."""
    cluster = ProcessCluster(tmp_path_factory.mktemp("compose-logs"), n_workers=2)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def compose_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("compose-data") / "X.zarr"
    write_synthetic(path, 30_000, 40, rank=10, noise=0.05, chunk_rows=3000)
    return path


def _blas_threads():
    from threadpoolctl import threadpool_info

    return sorted({pool["num_threads"] for pool in threadpool_info()
                   if pool["user_api"] == "blas"})


@pytest.mark.slow  # heavy; run in CI by .ci/run's slow step
def test_compose_cluster_runs_sketch_pca_and_cli(compose_cluster, compose_store, tmp_path,
                                                  monkeypatch):
    cluster = compose_cluster
    health = urllib.request.urlopen(f"http://127.0.0.1:{cluster.dashboard_port}/health",
                                    timeout=10).read()
    assert health == b"ok"
    worker_cmd, worker_env = compose_service("worker")
    local = dasketch.sketch(compose_store, 12, block_rows=2048)
    with dasketch.get_client(cluster.address) as client:
        client.wait_for_workers(2, timeout=60)
        workers = client.scheduler_info()["workers"].values()
        assert {w["nthreads"] for w in workers} == {int(_option(worker_cmd, "--nthreads"))}
        assert {w["memory_limit"] for w in workers} == {
            parse_bytes(_option(worker_cmd, "--memory-limit"))}
        # The workers run with the BLAS threads the recipe sets.
        expected = int(worker_env["OMP_NUM_THREADS"])
        assert set(map(tuple, client.run(_blas_threads).values())) == {(expected,)}
        remote = dasketch.sketch(compose_store, 12, client=client, block_rows=2048)
        default_blocks = dasketch.sketch(compose_store, 12, client=client)
        with client.as_current():
            pca = dasketch.SketchPCA(3, 12, block_rows=2048).fit(compose_store)
    np.testing.assert_allclose(remote.covariance(), local.covariance(), rtol=1e-9,
                               atol=1e-9 * np.abs(local.covariance()).max())
    exact = dasketch.SketchPCA(3, 12, block_rows=2048).fit(compose_store)
    np.testing.assert_allclose(np.abs(pca.components_ @ exact.components_.T),
                               np.eye(3), atol=1e-8)

    # The address from the environment, as the Jupyter service gets it.
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.address)
    with dasketch.get_client() as client:
        assert client.scheduler.address == cluster.address

    # The command-line tool pointed at the scheduler.
    out_file = tmp_path / "X.sketch.npz"
    run = subprocess.run([sys.executable, "-m", "dasketch.cli", "sketch", str(compose_store),
                          "-l", "12", "--scheduler", cluster.address, "--out", str(out_file),
                          "--quiet"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    saved = dasketch.load_sketch(out_file)
    assert saved.n_rows == 30_000
    np.testing.assert_array_equal(saved.B, default_blocks.B)
    assert saved.shrinkage == default_blocks.shrinkage


def test_compose_cluster_runs_regressions(compose_cluster, compose_store):
    """PwSGD (preconditioner pass, leverage pass, row gathering) through the
    compose cluster reaches the least-squares optimum within 1 %; dual random
    projection through it gives the same model as without a cluster."""
    import zarr

    from dasketch.linear_model import DualRandomProjectionRegressor, PWSGDRegressor

    A = zarr.open_array(str(compose_store))[:]
    rng = np.random.default_rng(6)
    b = A @ rng.standard_normal(A.shape[1]) + 0.1 * rng.standard_normal(A.shape[0])
    x_opt = np.linalg.lstsq(A, b, rcond=None)[0]
    best = np.linalg.norm(A @ x_opt - b)
    with dasketch.get_client(compose_cluster.address) as client:
        client.wait_for_workers(2, timeout=60)
        with client.as_current():
            pw = PWSGDRegressor(p=2, fit_intercept=False, random_state=0,
                                block_rows=2048).fit(compose_store, b)
            drp = DualRandomProjectionRegressor(alpha=10.0, sketch_size=20, block_rows=2048,
                                                random_state=0).fit(compose_store, b)
    local = DualRandomProjectionRegressor(alpha=10.0, sketch_size=20, block_rows=2048,
                                          random_state=0).fit(compose_store, b)
    np.testing.assert_allclose(drp.coef_, local.coef_, rtol=1e-8,
                               atol=1e-10 * np.abs(local.coef_).max())
    assert np.linalg.norm(A @ pw.coef_ - b) <= best * 1.01


def test_blas_threads_follow_the_compose_variable(compose_cluster):
    """DASK_BLAS_THREADS reaches the worker processes through the nanny (whose
    own default would be one thread)."""
    cluster = compose_cluster
    cluster.env["DASK_BLAS_THREADS"] = "2"
    try:
        cluster.start_worker()
    finally:
        del cluster.env["DASK_BLAS_THREADS"]
    with cluster.client(n_workers=3) as client:
        threads = client.run(_blas_threads)
    assert sorted(map(tuple, threads.values())) == [(1,), (1,), (2,)]


# ------------------------------------------------------------------ TLS
def _write_test_ca(directory):
    """A throwaway CA and one certificate signed by it (as in deploy/README.md)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(text):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def build(subject, issuer, public_key, signing_key, ca):
        builder = (x509.CertificateBuilder().subject_name(name(subject))
                   .issuer_name(name(issuer)).public_key(public_key)
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None),
                                  critical=True))
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = build("dasketch-test-ca", "dasketch-test-ca", ca_key.public_key(), ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = build("dask", "dasketch-test-ca", key.public_key(), ca_key, False)
    paths = {"ca": directory / "ca.pem", "cert": directory / "dask.pem",
             "key": directory / "dask-key.pem"}
    paths["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return {k: str(v) for k, v in paths.items()}


@pytest.mark.timeout(180)
def test_tls_cluster_accepts_only_clients_with_certificates(tmp_path):
    pytest.importorskip("cryptography")
    import dask

    certs = _write_test_ca(tmp_path)
    tls_args = ["--tls-ca-file", certs["ca"], "--tls-cert", certs["cert"],
                "--tls-key", certs["key"]]
    with ProcessCluster(tmp_path / "logs", n_workers=1, protocol="tls",
                        extra_args=tls_args) as cluster:
        assert cluster.address.startswith("tls://")
        security = {"distributed.comm.require-encryption": True,
                    "distributed.comm.tls.ca-file": certs["ca"],
                    "distributed.comm.tls.client.cert": certs["cert"],
                    "distributed.comm.tls.client.key": certs["key"]}
        with dask.config.set(security), dasketch.get_client(cluster.address) as client:
            client.wait_for_workers(1, timeout=60)
            assert all(a.startswith("tls://") for a in client.scheduler_info()["workers"])
            _sketch_and_check(client, 2400, 10, 5, seed=1)
        # Without a certificate, or in plain TCP, a client is refused in bounded time.
        for address in (cluster.address, cluster.address.replace("tls://", "tcp://")):
            with pytest.raises((OSError, TypeError, ValueError)):
                with dasketch.get_client(address, timeout="3s"):
                    pass
