"""NeuralTouch: grasping guided by neural descriptors and touch.

Sensing and objects: :mod:`neuract.touch.tactile` (fingertip taxel images from MuJoCo's
tactile sensor and contact forces, with a noise model), :mod:`neuract.touch.gripper` (a
parallel-jaw hand and the SO-101's jaw pads), :mod:`neuract.touch.shapes` and
:mod:`neuract.touch.objects` (procedural object families as watertight meshes and convex
pieces).

Neural descriptors (issue 46 part 3): :mod:`neuract.touch.vn` (Vector Neuron layers),
:mod:`neuract.touch.field` (the SE(3)-equivariant occupancy network and its descriptors),
:mod:`neuract.touch.training_shapes` and :mod:`neuract.touch.views` (training objects and
simulated single-view clouds), :mod:`neuract.touch.field_train` (training, evaluation,
checkpoints) and :mod:`neuract.touch.descriptors` (grasp transfer by descriptor matching over
SE(3)).
"""
