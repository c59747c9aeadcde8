"""MuJoCo Warp's step per traced function, per model variant (`boxjax.bench.profile_physics`)."""

from boxjax.bench import profile_physics

if __name__ == "__main__":
    raise SystemExit(profile_physics.main())
