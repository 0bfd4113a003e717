"""What azure-ai-ml itself builds for a job YAML: the reference dtrain's render must equal.

Only tests import this (the SDK is slow to import and dtrain's spec layer must not need it)."""
from __future__ import annotations

import json
import logging
import warnings


def sdk_job_body(path) -> dict:
    """properties of the job PUT that load_job(path) builds, before workspace resolution."""
    return sdk_job_document(path)["properties"]


def sdk_job_document(path) -> dict:
    """The whole body of the job PUT that load_job(path) builds (`{"properties": {...}}`), before
    workspace resolution.

    An inline environment is still an Environment object at that point; the SDK registers it as
    CliV2AnonymousEnvironment:<hash> at submit, so it is compared in that form."""
    warnings.filterwarnings("ignore")
    logging.getLogger("azure").setLevel(logging.CRITICAL)
    from azure.ai.ml import load_job
    from azure.ai.ml.entities import Environment

    job = load_job(str(path))
    if hasattr(job, "_to_job"):  # load_job returns a Command node for command YAMLs
        job = job._to_job()
    from azure.ai.ml._restclient.arm_ml_service._utils.model_base import SdkJSONEncoder

    class Encoder(SdkJSONEncoder):
        def default(self, o):
            if isinstance(o, Environment):
                return f"azureml:{o.name}:{o.version}"
            return super().default(o)

    # As the jobs client serialises the body it sends: read-only fields (the name, in the URL) left out.
    return json.loads(json.dumps(job._to_rest_object(), cls=Encoder, exclude_readonly=True))
