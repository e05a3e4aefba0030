/// A method's positional parameters, read with clear errors.
struct Parameters {
    let values: [JSONValue]

    init(_ values: [JSONValue]) { self.values = values }

    /// The string at `index`.
    func string(_ index: Int, _ name: String) throws(Aria2Error) -> String {
        guard index < values.count, let value = values[index].string else {
            throw .invalidParams("parameter \(index + 1) (\(name)) must be a string")
        }
        return value
    }

    /// The integer at `index` (a number or a string of digits).
    func integer(_ index: Int, _ name: String) throws(Aria2Error) -> Int {
        guard index < values.count, let value = values[index].integer else {
            throw .invalidParams("parameter \(index + 1) (\(name)) must be an integer")
        }
        return value
    }

    /// The array of strings at `index`.
    func strings(_ index: Int, _ name: String) throws(Aria2Error) -> [String] {
        guard index < values.count, let array = values[index].array else {
            throw .invalidParams("parameter \(index + 1) (\(name)) must be an array of strings")
        }
        var strings: [String] = []
        for element in array {
            guard let string = element.string else {
                throw .invalidParams("parameter \(index + 1) (\(name)) must be an array of strings")
            }
            strings.append(string)
        }
        return strings
    }

    /// The keys a `tell…` method asks for at `index`: all when absent or empty.
    func keys(_ index: Int) throws(Aria2Error) -> Set<String>? {
        guard index < values.count else { return nil }
        let keys = try strings(index, "keys")
        return keys.isEmpty ? nil : Set(keys)
    }

    /// The struct at `index`, empty when absent.
    func object(_ index: Int, _ name: String) throws(Aria2Error) -> [String: JSONValue] {
        guard index < values.count else { return [:] }
        if values[index] == .null { return [:] }
        guard let object = values[index].object else {
            throw .invalidParams("parameter \(index + 1) (\(name)) must be a struct")
        }
        return object
    }
}
