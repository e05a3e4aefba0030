import Foundation

/// A JSON value as JSON-RPC carries it: parameters in, results out.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The string, when it is one.
    public var string: String? {
        if case .string(let value) = self { value } else { nil }
    }

    /// The integer, when it is one or a string of one (aria2 clients send both).
    public var integer: Int? {
        switch self {
        case .int(let value): value
        case .double(let value) where value == value.rounded() && abs(value) < 1e15: Int(value)
        case .string(let value): Int(value)
        default: nil
        }
    }

    /// A yes or no: `true`/`false`, or the strings aria2's options use (`"true"`, `"false"`; clients send both).
    public var flag: Bool? {
        switch self {
        case .bool(let value): value
        case .string("true"): true
        case .string("false"): false
        default: nil
        }
    }

    /// An option's value as aria2 keeps it, a string: a number or a boolean is written as one (`4` → `"4"`).
    public var optionText: JSONValue? {
        switch self {
        case .string: self
        case .bool(let value): .string(value ? "true" : "false")
        case .int(let value): .string(String(value))
        case .double: integer.map { .string(String($0)) }
        default: nil
        }
    }

    /// The elements, when it is an array.
    public var array: [JSONValue]? {
        if case .array(let value) = self { value } else { nil }
    }

    /// The members, when it is an object.
    public var object: [String: JSONValue]? {
        if case .object(let value) = self { value } else { nil }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
