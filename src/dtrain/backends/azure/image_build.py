"""Whether a submit makes Azure ML build a new image, said before the job waits in Preparing for it.

An inline environment (image + conda file, or a build context) is registered by azure-ai-ml as
CliV2AnonymousEnvironment:<content hash> (rest.anonymous_environment_version, the SDK's own hash), and Azure
ML builds its image when a job first uses that version. So one GET of that version tells: found, an earlier
submit registered it and its image was built (or is being built) for that job; not found (404), this
submit registers it and Azure ML builds a new image first. Registered and registry environments are built
when they are created: nothing to predict."""
from __future__ import annotations

from .rest import ANONYMOUS_ENV_NAME

# What an image build costs: Azure ML's own guidance says a changed environment's rebuild "can take >5
# minutes" (azureml-cheatsheets, ci-dev); conda solves of large files take 45 minutes and more
# (MicrosoftLearning/mslearn-azure-ml#58). docs/environments.md cites both.
TYPICAL = "typically 5 to 15 minutes, 45 and more for a large conda file"


def anonymous_version(environment_id) -> str | None:
    """The hash of `azureml:CliV2AnonymousEnvironment:<hash>`, else None."""
    prefix = f"azureml:{ANONYMOUS_ENV_NAME}:"
    if isinstance(environment_id, str) and environment_id.startswith(prefix):
        return environment_id[len(prefix):]
    return None


def predict(ml, environment_id) -> str | None:
    """The sentence for this submit's environment (None: nothing to say). `ml`: the MLClient."""
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

    version = anonymous_version(environment_id)
    if version is None:
        return None
    short = f"{ANONYMOUS_ENV_NAME}:{version[:12]}"
    try:
        ml.environments.get(name=ANONYMOUS_ENV_NAME, version=version)
    except ResourceNotFoundError:
        return (f"this submit will build a new image for the inline environment ({short}): Azure ML takes "
                f"{TYPICAL}; the job shows Preparing meanwhile (`dtrain validate --env` checks it first)")
    except (HttpResponseError, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return f"whether this submit builds a new image is not known: the environment look-up failed ({first})"
    return (f"the image exists: the inline environment ({short}) was registered by an earlier submit, whose "
            "job built its image; no new build")
