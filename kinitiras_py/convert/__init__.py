"""Converters from other admission systems' documents (PodPreset, SuperGloo Mesh, KubeMod
ModRule, js-admissions) into kinitiras-py policies. One registry; each source system is one
module that registers its kinds. Nothing here imports the server or the cluster client."""
