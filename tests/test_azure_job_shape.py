"""A job read back from Azure reports the nodes x processes per node the spec layer counts for it."""
import pytest

from dtrain.backends.azure.jobinfo import rest_shape
from dtrain.backends.azure.rest import job_body
from dtrain.spec.validate import load_spec

from conftest import ROOT


@pytest.mark.parametrize("template", ["pytorch-ddp", "mpi", "tensorflow-multiworker",
                                      "tensorflow-parameter-server", "single-node", "model-parallel"])
@pytest.mark.parametrize("nodes", ["1", "2", "3"])
def test_shape_of_the_rest_body_is_the_spec_shape(template, nodes):
    spec, _ = load_spec(ROOT / "job_templates" / f"{template}.yml", [f"resources.instance_count={nodes}"])
    body = job_body(spec)
    assert rest_shape(body) == (spec.instance_count, spec.processes_per_node)
