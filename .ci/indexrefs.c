// Prints each reference that the package's own records in an index store make, one per line: path, line, column,
// USR, name, and whether the compiler made it (a for-await loop's next call). Used by .ci/availability.
#include <indexstore/indexstore.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

static indexstore_t store;

static void copy_ref(char *buf, size_t size, indexstore_string_ref_t ref) {
    size_t n = ref.length < size - 1 ? ref.length : size - 1;
    memcpy(buf, ref.data, n);
    buf[n] = 0;
}

static bool occurrence(void *context, indexstore_occurrence_t occ) {
    const char *path = context;
    indexstore_symbol_role_t roles = indexstore_occurrence_get_roles(occ);
    if (!(roles & (INDEXSTORE_SYMBOL_ROLE_REFERENCE | INDEXSTORE_SYMBOL_ROLE_CALL))) return true;
    indexstore_symbol_t sym = indexstore_occurrence_get_symbol(occ);
    indexstore_string_ref_t usr = indexstore_symbol_get_usr(sym);
    indexstore_string_ref_t name = indexstore_symbol_get_name(sym);
    unsigned line = 0, col = 0;
    indexstore_occurrence_get_line_col(occ, &line, &col);
    printf("%s\t%u\t%u\t%.*s\t%.*s\t%s\n", path, line, col, (int)usr.length, usr.data, (int)name.length, name.data,
           (roles & INDEXSTORE_SYMBOL_ROLE_IMPLICIT) ? "implicit" : "written");
    return true;
}

static bool dependency(void *context, indexstore_unit_dependency_t dep) {
    (void)context;
    if (indexstore_unit_dependency_get_kind(dep) != INDEXSTORE_UNIT_DEPENDENCY_RECORD) return true;
    if (indexstore_unit_dependency_is_system(dep)) return true;
    char path[4096], record[1024];
    copy_ref(path, sizeof path, indexstore_unit_dependency_get_filepath(dep));
    copy_ref(record, sizeof record, indexstore_unit_dependency_get_name(dep));
    indexstore_error_t error = NULL;
    indexstore_record_reader_t reader = indexstore_record_reader_create(store, record, &error);
    if (!reader) {
        fprintf(stderr, "record %s: %s\n", record, indexstore_error_get_description(error));
        exit(2);
    }
    indexstore_record_reader_occurrences_apply_f(reader, path, occurrence);
    indexstore_record_reader_dispose(reader);
    return true;
}

static bool unit(void *context, indexstore_string_ref_t name) {
    (void)context;
    char unit_name[1024];
    copy_ref(unit_name, sizeof unit_name, name);
    indexstore_error_t error = NULL;
    indexstore_unit_reader_t reader = indexstore_unit_reader_create(store, unit_name, &error);
    if (!reader) {
        fprintf(stderr, "unit %s: %s\n", unit_name, indexstore_error_get_description(error));
        exit(2);
    }
    if (!indexstore_unit_reader_is_system_unit(reader))
        indexstore_unit_reader_dependencies_apply_f(reader, NULL, dependency);
    indexstore_unit_reader_dispose(reader);
    return true;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s INDEX-STORE\n", argv[0]); return 2; }
    indexstore_error_t error = NULL;
    store = indexstore_store_create(argv[1], &error);
    if (!store) { fprintf(stderr, "%s: %s\n", argv[1], indexstore_error_get_description(error)); return 2; }
    indexstore_store_units_apply_f(store, 0, NULL, unit);
    indexstore_store_dispose(store);
    return 0;
}
