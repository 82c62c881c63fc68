"""``python -m mpicoll.mesh``: a mesh's layout of ranks, without MPI
(:mod:`mpicoll.parallel.mesh`)."""

if __name__ == "__main__":
    from mpicoll.parallel.mesh import main

    main()
