"""Beyond the shared YAMLs: one spec per field shape, each rendered by dtrain and by azure-ai-ml.
Equal bodies where the SDK accepts; where it rejects, dtrain rejects too. The few specs dtrain rejects
although the SDK accepts them are ones the service refuses after submit (listed in docs/spec.md)."""
import pytest
import yaml

from dtrain.errors import SpecError
from dtrain.backends.azure.render import rest_document
from dtrain.backends.azure.rest import job_body
from dtrain.spec.validate import load_spec
from sdk_reference import sdk_job_body, sdk_job_document

BASE = {"command": "python a.py", "code": "src", "environment": "azureml:myenv:1"}
CONDA = "name: t\nchannels: [conda-forge]\ndependencies:\n  - python=3.10\n  - pip:\n    - torch\n"

VARIANTS = {
    "env_latest": {"environment": "azureml:myenv@latest"},
    "env_noversion": {"environment": "azureml:myenv"},
    "env_registry": {"environment": "azureml://registries/azureml/environments/acpt/versions/3"},
    "env_arm": {"environment": "azureml:/subscriptions/0/resourceGroups/rg/providers/"
                               "Microsoft.MachineLearningServices/workspaces/ws/environments/e/versions/1"},
    "env_plain_name": {"environment": "myenv:1"},
    "env_inline_image": {"environment": {"image": "python:3.10"}},
    "env_inline_conda_file": {"environment": {"image": "python:3.10", "conda_file": "conda.yml"}},
    "env_inline_conda_dict": {"environment": {"image": "python:3.10", "conda_file": {"dependencies": ["python=3.10"]}}},
    "env_build": {"environment": {"build": {"path": "src"}}},
    "env_build_dockerfile": {"environment": {"build": {"path": "src", "dockerfile_path": "Dockerfile"}}},
    "env_file": {"environment": "file:envdir/env.yml"},
    "tags_str": {"tags": {"a": "1", "b": "x"}},
    "tags_int": {"tags": {"a": 1}},
    "tags_none": {"tags": {"a": None}},
    "properties": {"properties": {"a": "1"}},
    "envvars": {"environment_variables": {"A": "1", "B": "true", "C": "x", "E": None}},
    "inputs": {"inputs": {
        "i": 1, "f": 0.001, "b": True, "s": "str", "big": 1e20, "v": {"value": 3}, "n": None,
        "fo": {"type": "uri_folder", "path": "azureml://datastores/ws/paths/x/", "mode": "download"},
        "fi": {"type": "uri_file", "path": "https://x.blob.core.windows.net/c/f.csv", "mode": "direct"},
        "mt": {"type": "mltable", "path": "azureml:tbl:1", "mode": "eval_mount"},
        "m1": {"type": "custom_model", "path": "azureml:mymodel:2"},
        "m2": {"type": "mlflow_model", "path": "azureml:mymodel@latest", "mode": "ro_mount"},
        "up": {"type": "URI_FOLDER", "path": "azureml:a:1", "mode": "RO_MOUNT"},
        "loc": {"path": "data"}, "locf": {"type": "uri_file", "path": "data/f.txt"},
        "bind": {"type": "uri_folder", "path": "${{parent.inputs.y}}"}},
        "command": "python a.py ${{inputs.i}} ${{inputs.fo}}"},
    "typed_input": {"inputs": {"x": {"type": "integer", "default": 2}}},
    "typed_input_value": {"inputs": {"x": {"type": "string", "value": "a"}}},
    "input_mode_wrong_for_type": {"inputs": {"x": {"type": "uri_file", "path": "azureml:a:1", "mode": "eval_mount"}}},
    "outputs": {"outputs": {
        "o1": {"type": "uri_folder", "mode": "rw_mount"},
        "o2": {"type": "uri_file", "mode": "upload", "path": "azureml://datastores/ws/paths/o2"},
        "o3": {"type": "mlflow_model", "name": "m", "version": "3"}, "o4": None,
        "o5": {"type": "mltable", "mode": "mount"}, "o6": {"mode": "direct"},
        "o7": {"type": "custom_model", "version": 2, "name": "x"}}},
    "output_description": {"outputs": {"o": {"type": "uri_folder", "description": "d"}}},
    "output_mode_wrong": {"outputs": {"x": {"type": "uri_folder", "mode": "download"}}},
    "dist_pytorch": {"distribution": {"type": "PyTorch", "process_count_per_instance": 4},
                     "resources": {"instance_count": 2}},
    "dist_pytorch_default": {"distribution": {"type": "pytorch"}},
    "dist_tensorflow": {"distribution": {"type": "tensorflow", "worker_count": 2, "parameter_server_count": 1}},
    "dist_tensorflow_default": {"distribution": {"type": "tensorflow"}},
    "dist_mpi": {"distribution": {"type": "mpi", "process_count_per_instance": 2}},
    "dist_mpi_float": {"distribution": {"type": "mpi", "process_count_per_instance": 2.0}},
    "dist_ray": {"distribution": {"type": "ray", "port": 1234, "include_dashboard": True}},
    "resources": {"resources": {"instance_count": 2, "instance_type": "Standard_NC24ads_A100_v4",
                                "shm_size": "16g", "docker_args": "--ipc=host", "locations": ["westus"],
                                "max_instance_count": 4, "properties": {"a": "b"}}},
    "resources_docker_args_list": {"resources": {"docker_args": ["--ipc=host", "-e", "X=1"],
                                                 "max_instance_count": 3, "locations": ["eastus"]}},
    "resources_docker_args_empty_list": {"resources": {"docker_args": [], "locations": ["eastus"]}},
    "limits": {"limits": {"timeout": 3661}},
    "limits_str": {"limits": {"timeout": "3600"}},
    "queue": {"queue_settings": {"job_tier": "Spot", "priority": "high"}},
    "queue_null": {"queue_settings": {"job_tier": "null"}},
    "services": {"services": {
        "s1": {"type": "ssh", "ssh_public_keys": "ssh-rsa AAA", "nodes": "all"},
        "s2": {"type": "tensor_board", "log_dir": "logs", "port": 6006},
        "s3": {"type": "vs_code", "properties": {"x": "y"}}, "s4": {"type": "jupyter_lab"},
        "s5": {"type": "custom", "port": 1}}},
    "identity_user": {"identity": {"type": "user_identity"}},
    "identity_managed": {"identity": {"type": "managed", "client_id": "cid", "object_id": "oid"}},
    "identity_managed_msi": {"identity": {"type": "managed", "msi_resource_id": "rid"}},
    "identity_managed_identity": {"identity": {"type": "managed_identity", "client_id": "c"}},
    "identity_aml": {"identity": {"type": "aml_token"}},
    "compute_local": {"compute": "local"},
    "compute_name": {"compute": "gpu-cluster", "resources": {"instance_count": 1}},
    "compute_arm": {"compute": "azureml:/subscriptions/x/resourceGroups/y/providers/"
                               "Microsoft.MachineLearningServices/workspaces/w/computes/c"},
    "metadata": {"name": "job_1", "display_name": "d", "experiment_name": "e", "description": "desc",
                 "type": "command",
                 "$schema": "https://azuremlschemas.azureedge.net/latest/commandJob.schema.json"},
    "single_brackets": {"command": "python a.py {inputs.x}", "inputs": {"x": 1}},
    "code_file": {"code": "src/a.py"},
    "code_asset": {"code": "azureml:mycode:1"},
    "no_code": {"code": None},
    "parent": {"parent_job_name": "p"},
    "unknown_key": {"foo": 1},
    "command_int": {"command": 5},
}
# Every enum in the spellings people write (the REST name, camelCase, upper case): azure-ai-ml's enum
# fields transform case before matching (lower() for most, camel_to_snake for identity), so dtrain
# must accept exactly what it accepts and render what it renders.
_IDENTITY = ["AMLToken", "AmlToken", "amlToken", "AML_TOKEN", "amltoken", "Aml_Token", "UserIdentity",
             "USER_IDENTITY", "userIdentity", "useridentity", "Managed", "MANAGED", "ManagedIdentity",
             "managedIdentity", "MANAGED_IDENTITY", "managedidentity", "Managed_Identity"]
_DIST = ["PyTorch", "PYTORCH", "TensorFlow", "TENSORFLOW", "Mpi", "MPI", "Ray", "RAY"]
_INPUT_TYPE_MODE = [("URI_FILE", "Download"), ("Uri_Folder", "RO_MOUNT"), ("MLTable", "Eval_Mount"),
                    ("mlTable", "EVAL_DOWNLOAD"), ("Custom_Model", "DIRECT"), ("MLFlow_Model", "ro_mount"),
                    ("Triton_Model", "Download"), ("uri_folder", "ReadOnlyMount"), ("UriFolder", "download"),
                    ("uri_folder", "Mount"), ("uri_folder", "rw_mount"), ("uri_folder", "upload")]
_OUTPUT_TYPE_MODE = [("Uri_Folder", "RW_MOUNT"), ("URI_FILE", "Upload"), ("MLTable", "Mount"),
                     ("MLFlow_Model", "DIRECT"), ("Custom_Model", "rw_mount"), ("Triton_Model", "upload"),
                     ("uri_folder", "ReadWriteMount"), ("uri_folder", "download"), ("UriFolder", "upload")]
_SERVICE = ["SSH", "Ssh", "Tensor_Board", "TensorBoard", "tensorboard", "VS_Code", "VSCode", "vscode",
            "Jupyter_Lab", "JupyterLab", "jupyterlab", "Custom", "Tracking", "Studio"]
_TIER = ["SPOT", "Spot", "Standard", "BASIC", "Premium", "Null", "NULL", "none"]
_PRIORITY = ["High", "LOW", "Medium", "normal"]

for _v in _IDENTITY:
    VARIANTS[f"enum_identity_{_v}"] = {"identity": {"type": _v}}
for _v in _DIST:
    VARIANTS[f"enum_distribution_{_v}"] = {"distribution": {"type": _v}}
for _t, _m in _INPUT_TYPE_MODE:
    VARIANTS[f"enum_input_{_t}_{_m}"] = {"inputs": {"x": {"type": _t, "path": "azureml:a:1", "mode": _m}}}
for _t, _m in _OUTPUT_TYPE_MODE:
    VARIANTS[f"enum_output_{_t}_{_m}"] = {"outputs": {"x": {"type": _t, "mode": _m}}}
for _v in _SERVICE:
    VARIANTS[f"enum_service_{_v}"] = {"services": {"s": {"type": _v, "port": 8080}}}
for _v in _TIER:
    VARIANTS[f"enum_job_tier_{_v}"] = {"queue_settings": {"job_tier": _v}}
for _v in _PRIORITY:
    VARIANTS[f"enum_priority_{_v}"] = {"queue_settings": {"priority": _v}}
for _v in ["all", "All", "ALL", "some"]:
    VARIANTS[f"enum_service_nodes_{_v}"] = {"services": {"s": {"type": "ssh", "nodes": _v}}}
for _v in ["Command", "COMMAND"]:
    VARIANTS[f"enum_type_{_v}"] = {"type": _v}
for _v in ["LOCAL", "Local"]:
    VARIANTS[f"enum_compute_{_v}"] = {"compute": _v}
for _v in ["Linux", "WINDOWS"]:
    VARIANTS[f"enum_os_type_{_v}"] = {"environment": {"image": "python:3.10", "os_type": _v}}

# Keys the SDK renames or drops on the way to the body.
VARIANTS.update({
    "drop_compute_target_type": {"properties": {"_azureml.ComputeTargetType": "amlcdsi", "kept": "1",
                                                "_azureml.Other": "x"}},
    "drop_compute_target_type_case": {"properties": {"_AzureML.computetargettype": "amlcdsi"}},
    "rename_singularity": {"resources": {"properties": {"singularity": {"imageVersion": "", "slaTier": "Premium"}}}},
    "rename_singularity_case": {"resources": {"properties": {"Singularity": {"a": 1}, "itp": {"b": 2}}}},
    "rename_aisupercomputer": {"resources": {"properties": {"aisupercomputer": {"a": 1}}}},
    "input_description": {"inputs": {"x": {"type": "uri_folder", "path": "azureml:a:1", "description": "d"}}},
    "resources_properties_other_case": {"resources": {"properties": {"AISuperComputer": {"a": 1}, "ITP": {}}}},
    "resources_properties_itp_nulls": {"resources": {"properties": {
        "ITP": {"a": None, "b": {}, "c": [None, {}, 1]}, "Target_Selector": {"x": 1}, "n": None}}},
    "rename_singularity_nested_kept": {"resources": {"properties": {"x": {"singularity": 1}}}},
})

# Accepted by the SDK, refused by the service after submit: dtrain refuses them before.
# Every such case is a row of docs/spec.md's "Where dtrain is stricter than azure-ai-ml".
STRICTER = {"shm_no_unit": {"resources": {"shm_size": "16"}},
            "zero_nodes": {"resources": {"instance_count": 0}},
            "bad_name": {"name": "-bad name"},
            "fractional_timeout": {"limits": {"timeout": 10.5}},
            "zero_timeout": {"limits": {"timeout": 0}},
            "zero_processes": {"distribution": {"type": "pytorch", "process_count_per_instance": 0}},
            "zero_workers": {"distribution": {"type": "tensorflow", "worker_count": 0}},
            "zero_max_instances": {"resources": {"max_instance_count": 0}},
            "port_out_of_range": {"services": {"s": {"type": "ssh", "port": 70000}}},
            "bad_experiment_name": {"experiment_name": "-x"},
            "search_space_ref": {"command": "python a.py ${{search_space.lr}}"},
            "unknown_ref": {"command": "python a.py ${{foo.bar}}"},
            "torchrun_with_processes": {"command": "torchrun a.py",
                                        "distribution": {"type": "pytorch", "process_count_per_instance": 2}},
            "mpirun_in_mpi_job": {"command": "mpirun python a.py", "distribution": {"type": "mpi"}},
            "more_processes_than_gpus": {"distribution": {"type": "pytorch", "process_count_per_instance": 9},
                                         "resources": {"instance_type": "Standard_ND96isr_H100_v5"}},
            "uri_file_input_is_a_folder": {"inputs": {"x": {"type": "uri_file", "path": "data"}}},
            # the SDK sends these as written; the REST body's environmentVariables are strings
            "envvar_int": {"environment_variables": {"A": 1}},
            "envvar_bool": {"environment_variables": {"B": True}},
            "envvar_float": {"environment_variables": {"D": 1.5}},
            # ...and these counts are int32 there
            "instance_count_over_int32": {"resources": {"instance_count": 2**31}},
            "max_instance_count_over_int32": {"resources": {"max_instance_count": 2**31}},
            "processes_over_int32": {"distribution": {"type": "pytorch", "process_count_per_instance": 2**31}},
            "mpi_processes_over_int32": {"distribution": {"type": "mpi", "process_count_per_instance": 2**31}},
            "workers_over_int32": {"distribution": {"type": "tensorflow", "worker_count": 2**31,
                                                    "parameter_server_count": 2**31}}}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("print(1)\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f.txt").write_text("x\n")
    (tmp_path / "conda.yml").write_text(CONDA)
    (tmp_path / "envdir").mkdir()
    (tmp_path / "envdir" / "env.yml").write_text("name: e\nversion: '1'\nbuild:\n  path: .\n")
    return tmp_path


def _write(project, name, variant):
    d = dict(BASE)
    d.update(variant)
    d = {k: v for k, v in d.items() if not (k == "code" and v is None)}
    p = project / f"{name}.yml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_same_body_as_sdk_or_both_reject(project, name):
    p = _write(project, name, VARIANTS[name])
    try:
        ref = sdk_job_document(p)
    except Exception:
        ref = None
    if ref is None:
        with pytest.raises(SpecError):
            load_spec(p)
        return
    spec, _ = load_spec(p)
    assert rest_document(spec) == ref  # the whole PUT body, {"properties": {...}}


@pytest.mark.parametrize("name", sorted(STRICTER))
def test_stricter_than_sdk_where_the_service_refuses(project, name):
    p = _write(project, name, STRICTER[name])
    sdk_job_body(p)  # the SDK lets it through...
    with pytest.raises(SpecError):  # ...dtrain stops it before anything is paid for
        load_spec(p)


@pytest.mark.parametrize("ignore_name,ignore_text", [
    (".amlignore", "*.log\nlogs/\n"),
    (".gitignore", "*.log\n!keep.log\n**/cache\n/build\ndata/*.bin\n"),
    (".amlignore", "# nothing but a comment\n"),
])
def test_build_context_hash_honours_the_ignore_file_as_the_sdk_does(tmp_path, ignore_name, ignore_text):
    ctx = tmp_path / "ctx"
    for rel, text in {"Dockerfile": "FROM python\n", "a.log": "x", "keep.log": "k", "logs/b.txt": "y",
                      "sub/cache/c.txt": "z", "build/d.txt": "w", "sub/build/e.txt": "v",
                      "data/f.bin": "u", "data/g.txt": "t"}.items():
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / rel).write_text(text)
    (ctx / ignore_name).write_text(ignore_text)
    p = tmp_path / "job.yml"
    p.write_text("command: echo\nenvironment:\n  build:\n    path: ctx\n")
    spec, _ = load_spec(p)
    assert job_body(spec)["environmentId"] == sdk_job_body(p)["environmentId"]
