"""Built on the faces: named meshes of ranks (``mpicoll.Mesh``, like
torch's ``DeviceMesh``) and gradient bucketing (``GradientBucketer``,
like DDP's buckets). May import the faces and everything below them.
"""
