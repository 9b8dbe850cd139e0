from __future__ import annotations

from importlib.metadata import entry_points

from airflow_provider_sqlserver_cdc.get_provider_info import PACKAGE_NAME, get_provider_info


def test_entry_point_points_at_get_provider_info():
    eps = [
        ep
        for ep in entry_points(group="apache_airflow_provider")
        if ep.value.startswith("airflow_provider_sqlserver_cdc")
    ]
    assert len(eps) == 1
    assert eps[0].load() is get_provider_info


def test_provider_info_declares_required_fields():
    info = get_provider_info()
    assert info["package-name"] == PACKAGE_NAME
    for key in ("name", "description", "versions"):
        assert info[key]


def test_providers_manager_lists_the_provider():
    from airflow.providers_manager import ProvidersManager

    providers = ProvidersManager().providers
    assert PACKAGE_NAME in providers
    assert providers[PACKAGE_NAME].data["name"] == get_provider_info()["name"]


def test_every_declared_class_imports():
    """Each hook, operator, sensor and trigger the provider declares is importable."""
    from importlib import import_module

    info = get_provider_info()
    modules = [
        m
        for section in ("operators", "sensors", "triggers", "hooks")
        for entry in info[section]
        for m in entry.get("python-modules", [])
    ]
    class_names = [c["hook-class-name"] for c in info["connection-types"]]
    for module in modules:
        import_module(module)
    for dotted in class_names:
        module, _, name = dotted.rpartition(".")
        assert hasattr(import_module(module), name), dotted


def test_connection_type_sqlserver_cdc_is_the_hooks():
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

    (connection_type,) = get_provider_info()["connection-types"]
    assert connection_type["connection-type"] == SqlServerCdcHook.conn_type == "sqlserver_cdc"
    assert connection_type["hook-name"] == SqlServerCdcHook.hook_name
    assert connection_type["hook-class-name"].endswith(".SqlServerCdcHook")
    for name, field in connection_type["conn-fields"].items():
        assert field["label"] and field["schema"]["type"], name


def test_config_section_documents_the_driver_and_shared_path_options():
    from airflow.sdk import conf

    options = get_provider_info()["config"]["sqlserver_cdc"]["options"]
    assert set(options) == {"allow_driver_in_extra", "default_driver", "shared_local_paths"}
    assert options["allow_driver_in_extra"]["default"] == "False"
    for option in options.values():
        assert option["description"] and option["type"]
    assert conf.has_option("sqlserver_cdc", "allow_driver_in_extra")


def _defined_classes() -> dict[str, set[type]]:
    """Section -> the hooks, operators, sensors and triggers the package defines, found by importing every module.

    ``testing`` (the opt-in test harness) is not part of what the provider registers.
    """
    import importlib
    import importlib.util
    import inspect
    import pkgutil

    from airflow.sdk import BaseHook, BaseOperator, BaseSensorOperator
    from airflow.triggers.base import BaseTrigger

    import airflow_provider_sqlserver_cdc as package

    found: dict[str, set[type]] = {"hooks": set(), "operators": set(), "sensors": set(), "triggers": set()}
    for module_info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        if ".testing" in module_info.name:
            continue
        if (
            module_info.name.endswith(".lineage")
            and importlib.util.find_spec("airflow.providers.openlineage") is None
        ):
            continue  # imported only when the OpenLineage provider is installed; it defines no task or hook
        module = importlib.import_module(module_info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            if issubclass(cls, BaseSensorOperator):
                found["sensors"].add(cls)
            elif issubclass(cls, BaseOperator):
                found["operators"].add(cls)
            elif issubclass(cls, BaseTrigger):
                found["triggers"].add(cls)
            elif issubclass(cls, BaseHook):
                found["hooks"].add(cls)
    return found


def test_provider_info_lists_every_hook_operator_sensor_trigger_and_connection_type_the_package_defines():
    """Walks the package: a class defined but not listed (or listed under the wrong section) fails here."""
    info = get_provider_info()
    defined = _defined_classes()
    assert all(defined.values()), defined  # the walk finds something of each kind
    for section, classes in defined.items():
        listed = {m for entry in info[section] for m in entry["python-modules"]}
        missing = sorted(f"{c.__module__}.{c.__name__}" for c in classes if c.__module__ not in listed)
        assert not missing, f"get_provider_info()[{section!r}] leaves out {missing}"
        extra = listed - {c.__module__ for c in classes}
        assert not extra, f"get_provider_info()[{section!r}] lists modules that define none: {sorted(extra)}"
    conn_types = {c["connection-type"]: c["hook-class-name"] for c in info["connection-types"]}
    for hook in defined["hooks"]:
        assert hook.conn_type in conn_types, (
            f"connection type {hook.conn_type!r} of {hook.__name__} not listed"
        )
