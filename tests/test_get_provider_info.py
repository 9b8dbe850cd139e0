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
