"""The experiments beside the library: the active-mapping simulator (``simulator``: fields, robot, planners,
missions, fleets), dataset streams (``stream``), recorded surveys through any model (``replay``), the paper
reproductions and their sweep runner (``bench``), plots, and the ``onlinegp`` command (``cli``, started by
``entry``).

They use the library (:mod:`onlinegp`); the library never imports them. They need the ``cli`` extra
(``pip install "onlinegp[cli]"``); this package itself imports nothing, so that ``entry`` can say so without one.
"""
