"""What a model is and how it makes raw vectors: :mod:`.loader` resolves a model once and builds its backbone
(mteb's implementation or a sentence-transformers pipeline, :mod:`.mteb_backbone`; Hugging Face hidden states,
:mod:`.hf_backbone`), all typed against :class:`.base.BackboneProtocol`. Importing it loads neither torch nor mteb."""
