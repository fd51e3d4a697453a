"""A mailcap-style line parser: fields split on unquoted semicolons, then `key=value` parameters."""


def _parse_field(line, start, end):
    i = start
    while i < end:
        char = line[i]
        if char == ";":
            break
        i = i + 2 if char == "\\" else i + 1
    return line[start:i].strip(), i


def parse_line(line):
    fields = []
    i, n = 0, len(line)
    while i < n:
        field, i = _parse_field(line, i, n)
        fields.append(field)
        i = i + 1
    if len(fields) < 2:
        return None, None
    key, view, rest = fields[0], fields[1], fields[2:]
    params = {"view": view}
    for field in rest:
        i = field.find("=")
        if i < 0:
            name, value = field, ""
        else:
            name, value = field[:i].strip(), field[i + 1 :].strip()
        params[name] = value
    return key, params
