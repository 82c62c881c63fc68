"""Built on the faces: named meshes of ranks (``mpicoll.Mesh``, like
torch's ``DeviceMesh``), gradient bucketing (``GradientBucketer``, like
DDP's buckets), and, with torch, the torch.distributed backend and DDP's
hooks (``mpicoll.torch``). May import the faces and everything below them.
"""
