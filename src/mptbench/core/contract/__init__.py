"""The job contract between a Snakemake job and the engine: what one cell's run is given
(run.py), what each kind of engine job is given (jobs.py) and gives back (results.py), and the
one JSON codec for all of them (codec.py). Callers import it from here:
`from mptbench.core.contract import Run, encode`."""

from mptbench.core.contract.codec import ContractError, decode, decode_job, encode
from mptbench.core.contract.jobs import (
    ENGINE,
    CalibrateJob,
    DescribeJob,
    EnvironmentJob,
    FitJob,
    ParityJob,
    ProbeJob,
    RepeatJob,
)
from mptbench.core.contract.kinds import JOB_KINDS, KINDS, REPORTED, EngineJob, JobKind, kind_of
from mptbench.core.contract.results import (
    ArmResult,
    Calibration,
    EnvironmentFacts,
    FitResult,
    ModelInfo,
    ParityResult,
    ParityRun,
    ProbePoint,
    ProbeResult,
    Profiled,
    RepeatResult,
)
from mptbench.core.contract.run import (
    BackendConfig,
    Calibrate,
    ConvLayer,
    DatasetConfig,
    DeviceConfig,
    InputConfig,
    ModelConfig,
    Run,
    TrainConfig,
    VariantConfig,
)

__all__ = [
    "ENGINE", "JOB_KINDS", "KINDS", "REPORTED", "ArmResult", "BackendConfig", "Calibrate",
    "CalibrateJob", "Calibration", "ContractError", "ConvLayer", "DatasetConfig", "DescribeJob",
    "DeviceConfig", "EngineJob", "EnvironmentFacts", "EnvironmentJob", "FitJob", "FitResult",
    "InputConfig", "JobKind", "ModelConfig", "ModelInfo", "ParityJob", "ParityResult",
    "ParityRun", "ProbeJob", "ProbePoint", "ProbeResult", "Profiled", "RepeatJob",
    "RepeatResult", "Run", "TrainConfig", "VariantConfig", "decode", "decode_job", "encode",
    "kind_of",
]
